//! Contacts in sled: records and every index entry in one tree, so one transaction keeps
//! them consistent.
//!
//! Keys (`app` and `id` are 24-character ObjectIds):
//! - `r` app id             -> the contact as JSON
//! - `e` app email          -> id (the unique e-mail index)
//! - `i` app field value id -> empty (one sort index per sortable field; values order as bytes)
//! - `n` app                -> number of contacts (u64, big endian) for the plan limit
//!
//! Invariant: a contact's record, e-mail entry, sort entries and count change in one
//! transaction; a hard delete removes all of them (GDPR erasure leaves nothing behind).

use sled::transaction::{ConflictableTransactionError, TransactionalTree};
use sled::Transactional;

use super::model::{Contact, ContactPatch, Email, Mode, Rejection, Source, Status};
use crate::ids::{self, Timestamp};
use crate::storage::changes::{self, types, Actor, Change, Facets};
use crate::storage::{decode, encode, idempotency, StoreError};
use crate::validation::FieldError;

pub const TREE: &str = "contacts";

/// What can go wrong with a contact operation, in domain terms.
#[derive(Debug)]
pub enum ContactError {
    NotFound,
    Invalid(Vec<FieldError>),
    NeedsConsent,
    DuplicateEmail { existing_id: String },
    PlanLimit { limit: u64, current: u64 },
    Store(StoreError),
}

crate::storage::store_error!(ContactError);

impl From<Rejection> for ContactError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::Invalid(d) => ContactError::Invalid(d),
            Rejection::NeedsConsent => ContactError::NeedsConsent,
        }
    }
}

cursor::sort_fields! {
    /// The sortable fields (api.md §5) and their index tag.
    pub SortField {
        CreatedAt = "createdAt" / b'c',
        UpdatedAt = "updatedAt" / b'u',
        Score = "score" / b's',
        LastName = "lastName" / b'l',
        Email = "email" / b'e',
    }
}

impl SortField {
    /// The value's bytes in the index: they order as the field does.
    fn encode(self, c: &Contact) -> Vec<u8> {
        fn micros(t: Timestamp) -> [u8; 8] {
            ((t.micros() as u64) ^ (1 << 63)).to_be_bytes()
        }
        match self {
            SortField::CreatedAt => micros(c.created_at).to_vec(),
            SortField::UpdatedAt => micros(c.updated_at).to_vec(),
            SortField::Score => (c.score.max(0) as u64).to_be_bytes().to_vec(),
            // Validation forbids control characters, so 0 ends the value unambiguously.
            SortField::LastName => {
                let mut v = c
                    .last_name
                    .as_deref()
                    .unwrap_or("")
                    .to_lowercase()
                    .into_bytes();
                v.push(0);
                v
            }
            SortField::Email => {
                let mut v = c.email.as_str().as_bytes().to_vec();
                v.push(0);
                v
            }
        }
    }
}

/// Order of a list.
pub type Sort = cursor::Sort<SortField>;

/// Filters of `GET /acq/v1/contacts`; empty vectors mean "any".
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub statuses: Vec<Status>,
    pub sources: Vec<Source>,
    pub tags: Vec<String>,
    pub emails: Vec<String>,
    pub company_ids: Vec<String>,
    /// Lowercased substring of name, e-mail or company.
    pub q: Option<String>,
    pub score_min: Option<i64>,
    pub score_max: Option<i64>,
    pub created_after: Option<Timestamp>,
    pub updated_after: Option<Timestamp>,
}

impl Filter {
    fn matches(&self, c: &Contact) -> bool {
        fn any_of<T: PartialEq + ?Sized, U: std::borrow::Borrow<T>>(set: &[U], v: &T) -> bool {
            set.is_empty() || set.iter().any(|s| s.borrow() == v)
        }
        let after = |bound: Option<Timestamp>, t: Timestamp| bound.is_none_or(|b| t > b);
        any_of(&self.statuses, &c.status)
            && any_of(&self.sources, &c.source)
            && any_of::<str, _>(&self.emails, c.email.as_str())
            && (self.company_ids.is_empty()
                || c.company_id
                    .as_deref()
                    .is_some_and(|id| any_of::<str, _>(&self.company_ids, id)))
            && (self.tags.is_empty() || self.tags.iter().any(|t| c.tags.contains(t)))
            && self.score_min.is_none_or(|m| c.score >= m)
            && self.score_max.is_none_or(|m| c.score <= m)
            && after(self.created_after, c.created_at)
            && after(self.updated_after, c.updated_at)
            && self.q.as_deref().is_none_or(|q| {
                [
                    Some(c.email.as_str()),
                    c.first_name.as_deref(),
                    c.last_name.as_deref(),
                    c.company.as_deref(),
                ]
                .into_iter()
                .flatten()
                .any(|s| s.to_lowercase().contains(q))
            })
    }
}

pub use crate::storage::cursor::Cursor;
pub use crate::storage::cursor::Sortable;
use crate::storage::cursor::{self, Page, Walk};

fn record_key(app: &str, id: &str) -> Vec<u8> {
    [b"r", app.as_bytes(), id.as_bytes()].concat()
}

fn email_key(app: &str, email: &Email) -> Vec<u8> {
    let email = email.as_str();
    [b"e", app.as_bytes(), email.as_bytes()].concat()
}

fn index_prefix(app: &str, field: SortField) -> Vec<u8> {
    [b"i", app.as_bytes(), &[field.tag()]].concat()
}

fn count_key(app: &str) -> Vec<u8> {
    [b"n", app.as_bytes()].concat()
}

fn index_keys(c: &Contact) -> impl Iterator<Item = Vec<u8>> + '_ {
    SortField::ALL.iter().map(move |&f| {
        [
            index_prefix(&c.app_id, f),
            f.encode(c),
            c.id.as_bytes().to_vec(),
        ]
        .concat()
    })
}

type Tx<T> = Result<T, ConflictableTransactionError<ContactError>>;

fn abort<T>(e: ContactError) -> Tx<T> {
    Err(ConflictableTransactionError::Abort(e))
}

fn read_count(tx: &TransactionalTree, app: &str) -> Tx<u64> {
    Ok(decode_count(tx.get(count_key(app))?.as_deref()))
}

/// Inserts a new contact with its index entries; checks the e-mail is free and the plan has room.
fn insert_tx(tx: &TransactionalTree, c: &Contact, limit: Option<u64>) -> Tx<()> {
    if let Some(existing) = tx.get(email_key(&c.app_id, &c.email))? {
        return abort(ContactError::DuplicateEmail {
            existing_id: String::from_utf8_lossy(&existing).into_owned(),
        });
    }
    let count = read_count(tx, &c.app_id)?;
    if let Some(limit) = limit {
        if count >= limit {
            return abort(ContactError::PlanLimit {
                limit,
                current: count,
            });
        }
    }
    tx.insert(record_key(&c.app_id, &c.id), encode(c))?;
    tx.insert(email_key(&c.app_id, &c.email), c.id.as_bytes())?;
    for k in index_keys(c) {
        tx.insert(k, &[][..])?;
    }
    tx.insert(count_key(&c.app_id), &(count + 1).to_be_bytes()[..])?;
    Ok(())
}

/// Replaces `old` by `new` (same id), moving the index entries whose values changed.
fn replace_tx(tx: &TransactionalTree, old: &Contact, new: &Contact) -> Tx<()> {
    if old.email != new.email {
        if let Some(existing) = tx.get(email_key(&new.app_id, &new.email))? {
            return abort(ContactError::DuplicateEmail {
                existing_id: String::from_utf8_lossy(&existing).into_owned(),
            });
        }
        tx.remove(email_key(&old.app_id, &old.email))?;
        tx.insert(email_key(&new.app_id, &new.email), new.id.as_bytes())?;
    }
    for (o, n) in index_keys(old).zip(index_keys(new)) {
        if o != n {
            tx.remove(o)?;
            tx.insert(n, &[][..])?;
        }
    }
    tx.insert(record_key(&new.app_id, &new.id), encode(new))?;
    Ok(())
}

/// Records the event `kind` about `c` (as the API shows it) at `now` by `by` in the changes'
/// tree `ch`.
fn record_tx(
    ch: &TransactionalTree,
    kind: &str,
    c: &Contact,
    (now, by): (Timestamp, &Actor),
) -> Tx<()> {
    let change = Change::new(kind, &c.app_id, &c.id, now, by, changes::data("contact", c))
        .with(Facets::contact_status(c.status.name()));
    changes::record::<ContactError>(ch, &change)?;
    Ok(())
}

fn load(tree: &sled::Tree, app: &str, id: &str) -> Result<Option<Contact>, StoreError> {
    let key = record_key(app, id);
    match tree.get(&key)? {
        Some(v) => Ok(Some(decode(&key, &v)?)),
        None => Ok(None),
    }
}

/// Makes a contact created at `now` from a create patch; does not store it.
pub fn build(app: &str, patch: &ContactPatch, now: Timestamp) -> Result<Contact, ContactError> {
    let mut c = Contact::blank(ids::object_id(), app.to_owned(), now);
    patch.apply(&mut c, Mode::Create)?;
    Ok(c)
}

/// Stores a new contact (by `by`, at its `createdAt`). `limit` is the plan's contact quota
/// (`None`: unlimited).
pub fn create(
    db: &sled::Db,
    c: &Contact,
    limit: Option<u64>,
    by: &Actor,
) -> Result<(), ContactError> {
    create_unflushed(db, c, limit, by)?;
    db.flush()?;
    Ok(())
}

fn create_unflushed(
    db: &sled::Db,
    c: &Contact,
    limit: Option<u64>,
    by: &Actor,
) -> Result<(), ContactError> {
    let (tree, changes) = changes::with_changes(db, TREE)?;
    (&tree, &changes).transaction(|(tx, ch)| {
        insert_tx(tx, c, limit)?;
        record_tx(ch, types::CONTACT_CREATED, c, (c.created_at, by))
    })?;
    Ok(())
}

/// Whether the contact `id` of `app` exists.
pub fn exists(db: &sled::Db, app: &str, id: &str) -> Result<bool, StoreError> {
    Ok(ids::is_object_id(id) && db.open_tree(TREE)?.contains_key(record_key(app, id))?)
}

pub fn get(db: &sled::Db, app: &str, id: &str) -> Result<Option<Contact>, StoreError> {
    if !ids::is_object_id(id) {
        return Ok(None);
    }
    load(&db.open_tree(TREE)?, app, id)
}

/// Applies a merge patch to the contact `id` of `app`, updated at `now`.
pub fn update(
    db: &sled::Db,
    app: &str,
    id: &str,
    patch: &ContactPatch,
    (now, by): (Timestamp, &Actor),
) -> Result<Contact, ContactError> {
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let updated = (&tree, &changes).transaction(|(tx, ch)| {
        let key = record_key(app, id);
        let Some(bytes) = tx.get(&key)? else {
            return abort(ContactError::NotFound);
        };
        let old: Contact =
            decode(&key, &bytes).map_err(|e| ConflictableTransactionError::Abort(e.into()))?;
        let mut new = old.clone();
        if let Err(r) = patch.apply(&mut new, Mode::Patch) {
            return abort(r.into());
        }
        new.updated_at = now;
        replace_tx(tx, &old, &new)?;
        record_tx(ch, types::CONTACT_UPDATED, &new, (now, by))?;
        Ok(new)
    })?;
    db.flush()?;
    Ok(updated)
}

/// Hard delete: the record, its e-mail entry, its sort entries; the count goes down; recorded
/// as `contact.deleted` (at `now`, by `by`).
pub fn delete(
    db: &sled::Db,
    app: &str,
    id: &str,
    (now, by): (Timestamp, &Actor),
) -> Result<(), ContactError> {
    remove(db, app, id, Some((now, by)))
}

/// `delete` for an erasure: no event (the erasure's own covers it, and nothing of the person
/// is sent out).
pub fn erase(db: &sled::Db, app: &str, id: &str) -> Result<(), ContactError> {
    remove(db, app, id, None)
}

fn remove(
    db: &sled::Db,
    app: &str,
    id: &str,
    event: Option<(Timestamp, &Actor)>,
) -> Result<(), ContactError> {
    if !ids::is_object_id(id) {
        return Err(ContactError::NotFound);
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    (&tree, &changes).transaction(|(tx, ch)| {
        let key = record_key(app, id);
        let Some(bytes) = tx.get(&key)? else {
            return abort(ContactError::NotFound);
        };
        let c: Contact =
            decode(&key, &bytes).map_err(|e| ConflictableTransactionError::Abort(e.into()))?;
        tx.remove(key)?;
        tx.remove(email_key(app, &c.email))?;
        for k in index_keys(&c) {
            tx.remove(k)?;
        }
        let count = read_count(tx, app)?;
        tx.insert(count_key(app), &count.saturating_sub(1).to_be_bytes()[..])?;
        if let Some(at) = event {
            record_tx(ch, types::CONTACT_DELETED, &c, at)?;
        }
        Ok(())
    })?;
    // Erasure covers the answers kept for Idempotency-Key replays that show the contact.
    idempotency::forget_holding(db, app, id)?;
    db.flush()?;
    Ok(())
}

/// One page of a walk of the index of `field`, filtered. The walk's budget bounds the index
/// entries read: when it runs out before the page is full, the page is short (`cut`) and the
/// cursor continues the walk, so a selective filter answers in bounded time, a part of the app
/// at a time.
pub fn list(
    db: &sled::Db,
    app: &str,
    filter: &Filter,
    field: SortField,
    walk: Walk,
) -> Result<Page<Contact>, StoreError> {
    let tree = db.open_tree(TREE)?;
    cursor::page(&tree, &index_prefix(app, field), walk, |entry, _| {
        let id = std::str::from_utf8(&entry[entry.len().saturating_sub(24)..]).unwrap_or_default();
        Ok(load(&tree, app, id)?.filter(|c| filter.matches(c)))
    })
}

/// Finds a contact of `app` by e-mail.
pub fn find_by_email(
    db: &sled::Db,
    app: &str,
    email: &Email,
) -> Result<Option<Contact>, StoreError> {
    let tree = db.open_tree(TREE)?;
    match tree.get(email_key(app, email))? {
        Some(id) => load(&tree, app, &String::from_utf8_lossy(&id)),
        None => Ok(None),
    }
}

/// Number of contacts of `app` (what the plan limit counts).
pub fn count(db: &sled::Db, app: &str) -> Result<u64, StoreError> {
    let tree = db.open_tree(TREE)?;
    Ok(decode_count(tree.get(count_key(app))?.as_deref()))
}

fn decode_count(v: Option<&[u8]>) -> u64 {
    v.and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// Result of one item of a batch.
#[derive(Debug)]
pub enum BatchOutcome {
    Created(Contact),
    Updated(Contact),
    Failed(ContactError),
}

impl BatchOutcome {
    /// The contact an item created or updated.
    pub fn contact(&self) -> Option<&Contact> {
        match self {
            BatchOutcome::Created(c) | BatchOutcome::Updated(c) => Some(c),
            BatchOutcome::Failed(_) => None,
        }
    }
}

/// Creates (or, with `upsert`, updates by e-mail) each item in turn; each item is its own
/// transaction, so one bad item never stops the others. An item that failed validation is
/// reported as it is. One flush covers the whole batch, made at `now`.
pub fn batch(
    db: &sled::Db,
    app: &str,
    items: &[Result<ContactPatch, Vec<FieldError>>],
    upsert: bool,
    limit: Option<u64>,
    (now, by): (Timestamp, &Actor),
) -> Result<Vec<BatchOutcome>, StoreError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let outcome = (|| -> Result<BatchOutcome, ContactError> {
            let patch = item
                .as_ref()
                .map_err(|d| ContactError::Invalid(d.clone()))?;
            let c = build(app, patch, now)?;
            if upsert {
                if let Some(existing) = find_by_email(db, app, &c.email)? {
                    let updated = update(db, app, &existing.id, patch, (now, by))?;
                    return Ok(BatchOutcome::Updated(updated));
                }
            }
            create_unflushed(db, &c, limit, by)?;
            Ok(BatchOutcome::Created(c))
        })();
        out.push(outcome.unwrap_or_else(BatchOutcome::Failed));
    }
    db.flush()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::changes::Change;
    use serde_json::json;

    #[test]
    fn a_walk_within_a_budget_resumes_where_it_stopped_and_finds_every_match_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let items: Vec<_> = (0..50)
            .map(|n| {
                let v = json!({"email": format!("p{n}@x.io"), "score": n, "company": if n % 10 == 0 { "Rare" } else { "Common" }});
                ContactPatch::parse(v.as_object().unwrap(), Mode::Create)
            })
            .collect();
        let now = Timestamp::from_micros(1_750_000_000_000_000);
        batch(&db, "app", &items, false, None, (now, &Actor::System)).unwrap();
        let filter = Filter {
            q: Some("rare".into()),
            ..Filter::default()
        };
        let sort = Sort {
            field: SortField::Score,
            descending: false,
        };
        let (mut found, mut after, mut stops) = (Vec::new(), None, 0);
        loop {
            let walk = Walk::new(3, after.as_ref()).budget(7);
            let page = list(&db, "app", &filter, sort.field, walk).unwrap();
            found.extend(page.items.into_iter().map(|c| c.score));
            stops += usize::from(page.cut);
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(found, [0, 10, 20, 30, 40]);
        assert!(stops >= 5, "the budget stopped the walk {stops} times");
        let all = list(&db, "app", &filter, sort.field, Walk::new(10, None)).unwrap();
        assert_eq!((all.items.len(), all.next.is_none()), (5, true));
    }

    fn changes_since(db: &sled::Db, seen: &mut usize) -> Vec<Change> {
        let all = changes::recorded(db);
        let new = all[*seen..].to_vec();
        *seen = all.len();
        new
    }

    #[test]
    fn every_contact_change_records_one_event_and_an_erasure_none() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let (app, now, seen) = (ids::object_id(), Timestamp::t0(), &mut 0);
        let key = Actor::ApiKey { id: "k1".into() };
        let body = json!({"email": "ada@x.io", "status": "contacted"});
        let patch = ContactPatch::parse(body.as_object().unwrap(), Mode::Create).unwrap();
        let c = build(&app, &patch, now).unwrap();
        create(&db, &c, None, &key).unwrap();
        let [e] = &changes_since(&db, seen)[..] else {
            panic!()
        };
        assert_eq!(
            (e.kind.as_str(), e.subject.as_str()),
            ("contact.created", c.id.as_str())
        );
        assert_eq!(
            (e.actor.clone(), e.app_id.clone()),
            (key.clone(), app.clone())
        );
        assert_eq!(e.facets.contact_status.as_deref(), Some("contacted"));
        assert_eq!(e.data, json!({"contact": c}));
        assert!(create(&db, &c, None, &key).is_err(), "the e-mail is taken");
        assert!(changes_since(&db, seen).is_empty());

        let body = json!({"status": "customer"});
        let patch = ContactPatch::parse(body.as_object().unwrap(), Mode::Patch).unwrap();
        let by = Actor::User {
            id: "u".into(),
            email: "u@t.io".into(),
        };
        let updated = update(&db, &app, &c.id, &patch, (now, &by)).unwrap();
        let [e] = &changes_since(&db, seen)[..] else {
            panic!()
        };
        assert_eq!((e.kind.as_str(), e.actor.clone()), ("contact.updated", by));
        assert_eq!(e.facets.contact_status.as_deref(), Some("customer"));
        assert_eq!(e.data, json!({"contact": updated}));

        let rows = [
            json!({"email": "ada@x.io", "score": 7}),
            json!({"email": "bob@x.io"}),
        ];
        let items: Vec<_> = rows
            .iter()
            .map(|v| ContactPatch::parse(v.as_object().unwrap(), Mode::Create))
            .collect();
        let out = batch(&db, &app, &items, true, None, (now, &key)).unwrap();
        let kinds: Vec<_> = changes_since(&db, seen)
            .into_iter()
            .map(|e| (e.kind, e.data))
            .collect();
        let made: Vec<_> = out
            .iter()
            .map(|o| json!({"contact": o.contact().unwrap()}))
            .collect();
        assert_eq!(
            kinds,
            [
                ("contact.updated".to_owned(), made[0].clone()),
                ("contact.created".to_owned(), made[1].clone())
            ]
        );

        delete(&db, &app, &c.id, (now, &Actor::Admin)).unwrap();
        let [e] = &changes_since(&db, seen)[..] else {
            panic!()
        };
        assert_eq!(
            (e.kind.as_str(), e.actor.clone()),
            ("contact.deleted", Actor::Admin)
        );
        assert_eq!(
            e.data["contact"]["score"],
            json!(7),
            "the contact as it was"
        );
        let bob = out[1].contact().unwrap();
        erase(&db, &app, &bob.id).unwrap();
        assert!(get(&db, &app, &bob.id).unwrap().is_none());
        assert!(
            changes_since(&db, seen).is_empty(),
            "an erasure sends nothing of the person"
        );
    }
}
