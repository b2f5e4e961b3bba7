//! Team accounts and sessions in sled, tree `accounts`:
//! - `u` id            -> the `User`
//! - `e` email         -> id (unique e-mail index)
//! - `s` sha256(sid)   -> the `Session` (the session id itself is never stored)
//! - `!setup`          -> the id of the first owner (set once: the setup page works once)
//!
//! An account and its e-mail entry are written in one transaction; every write is flushed
//! before it returns.

use sled::transaction::ConflictableTransactionError;

use super::model::{Role, Session, User};
use crate::ids::Timestamp;
use crate::storage::{decode, encode, StoreError};

pub const TREE: &str = "accounts";
const SETUP: &[u8] = b"!setup";

/// Why an account could not be created.
#[derive(Debug)]
pub enum AccountError {
    /// Another account has this e-mail.
    EmailTaken,
    /// The first owner exists already (the setup page is spent).
    AlreadySetUp,
    /// The account is the last owner (someone must keep managing the team).
    LastOwner,
    /// No such account.
    NoSuchUser,
    Store(StoreError),
}

crate::storage::store_error!(AccountError);

fn key(tag: u8, rest: &str) -> Vec<u8> {
    [&[tag][..], rest.as_bytes()].concat()
}

/// True once the first owner has been created.
pub fn is_set_up(db: &sled::Db) -> Result<bool, StoreError> {
    Ok(db.open_tree(TREE)?.contains_key(SETUP)?)
}

/// Stores a new account. With `first`, only if no first owner exists yet (checked in the same
/// transaction, so two racing setup forms make one owner).
pub fn create_user(db: &sled::Db, user: &User, first: bool) -> Result<(), AccountError> {
    let tree = db.open_tree(TREE)?;
    tree.transaction(|tx| {
        if first && tx.get(SETUP)?.is_some() {
            return Err(ConflictableTransactionError::Abort(
                AccountError::AlreadySetUp,
            ));
        }
        if tx.get(key(b'e', &user.email))?.is_some() {
            return Err(ConflictableTransactionError::Abort(
                AccountError::EmailTaken,
            ));
        }
        tx.insert(key(b'e', &user.email), user.id.as_bytes())?;
        tx.insert(key(b'u', &user.id), encode(user))?;
        if first {
            tx.insert(SETUP, user.id.as_bytes())?;
        }
        Ok(())
    })?;
    db.flush()?;
    Ok(())
}

pub fn get_user(db: &sled::Db, id: &str) -> Result<Option<User>, StoreError> {
    let k = key(b'u', id);
    match db.open_tree(TREE)?.get(&k)? {
        Some(v) => Ok(Some(decode(&k, &v)?)),
        None => Ok(None),
    }
}

/// The account with this (normalised) e-mail.
pub fn user_by_email(db: &sled::Db, email: &str) -> Result<Option<User>, StoreError> {
    match db.open_tree(TREE)?.get(key(b'e', email))? {
        Some(id) => get_user(db, &String::from_utf8_lossy(&id)),
        None => Ok(None),
    }
}

/// Every account, oldest first (a team is small).
pub fn list_users(db: &sled::Db) -> Result<Vec<User>, StoreError> {
    crate::storage::decode_all(&db.open_tree(TREE)?, b"u")
}

/// Stores a session under `skey` (the hash of its id).
pub fn insert_session(db: &sled::Db, skey: &str, s: &Session) -> Result<(), StoreError> {
    db.open_tree(TREE)?.insert(key(b's', skey), encode(s))?;
    db.flush()?;
    Ok(())
}

/// The live session stored under `skey` and its account; an expired one is removed.
pub fn session(
    db: &sled::Db,
    skey: &str,
    now: Timestamp,
) -> Result<Option<(Session, User)>, StoreError> {
    let tree = db.open_tree(TREE)?;
    let k = key(b's', skey);
    let Some(v) = tree.get(&k)? else {
        return Ok(None);
    };
    let mut s: Session = decode(&k, &v)?;
    if !s.is_live(now) {
        tree.remove(&k)?;
        return Ok(None);
    }
    let Some(user) = get_user(db, &s.user_id)? else {
        tree.remove(&k)?;
        return Ok(None);
    };
    if s.needs_touch(now) {
        s.last_seen = now;
        // Only if unchanged: a sign-out racing this page view stays signed out.
        let _ = tree.compare_and_swap(&k, Some(v), Some(encode(&s)))?;
    }
    Ok(Some((s, user)))
}

/// Ends a session (sign-out).
pub fn delete_session(db: &sled::Db, skey: &str) -> Result<(), StoreError> {
    db.open_tree(TREE)?.remove(key(b's', skey))?;
    db.flush()?;
    Ok(())
}

/// Serialises the changes that count owners (two owners removing each other at once must not
/// leave the team with none).
static TEAM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Removes an account, its e-mail entry and every session of it; refused for the last owner.
pub fn delete_user(db: &sled::Db, id: &str) -> Result<User, AccountError> {
    let _team = TEAM.lock().unwrap_or_else(|e| e.into_inner());
    let users = list_users(db)?;
    let user = users
        .iter()
        .find(|u| u.id == id)
        .cloned()
        .ok_or(AccountError::NoSuchUser)?;
    let owners = users.iter().filter(|u| u.role == Role::Owner).count();
    if user.role == Role::Owner && owners <= 1 {
        return Err(AccountError::LastOwner);
    }
    let tree = db.open_tree(TREE)?;
    tree.remove(key(b'u', id))?;
    tree.remove(key(b'e', &user.email))?;
    end_sessions(db, id, None)?;
    db.flush()?;
    Ok(user)
}

/// Replaces an account's password hash (compare-and-swap on the record).
pub fn set_password(db: &sled::Db, id: &str, hash: &str) -> Result<(), AccountError> {
    let tree = db.open_tree(TREE)?;
    let k = key(b'u', id);
    loop {
        let Some(v) = tree.get(&k)? else {
            return Err(AccountError::NoSuchUser);
        };
        let mut user: User = decode(&k, &v)?;
        user.password_hash = hash.to_owned();
        if tree
            .compare_and_swap(&k, Some(v), Some(encode(&user)))?
            .is_ok()
        {
            db.flush()?;
            return Ok(());
        }
    }
}

/// Ends every session of an account but `keep` (the store key of the session to keep);
/// returns how many ended.
pub fn end_sessions(db: &sled::Db, user_id: &str, keep: Option<&str>) -> Result<usize, StoreError> {
    let tree = db.open_tree(TREE)?;
    let kept = keep.map(|k| key(b's', k));
    let mut ended = 0;
    for kv in tree.scan_prefix(b"s") {
        let (k, v) = kv?;
        let theirs = decode::<Session>(&k, &v).is_ok_and(|s| s.user_id == user_id);
        if theirs && kept.as_deref() != Some(&k[..]) {
            tree.remove(&k)?;
            ended += 1;
        }
    }
    db.flush()?;
    Ok(ended)
}

/// Removes every expired session; returns how many (start-up).
pub fn sweep_sessions(db: &sled::Db, now: Timestamp) -> Result<usize, StoreError> {
    let tree = db.open_tree(TREE)?;
    let mut removed = 0;
    for kv in tree.scan_prefix(b"s") {
        let (k, v) = kv?;
        let live = decode::<Session>(&k, &v).is_ok_and(|s| s.is_live(now));
        if !live {
            tree.remove(&k)?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::model::{session_key, Role, User};

    fn user(email: &str) -> User {
        User {
            id: crate::ids::object_id(),
            email: email.into(),
            name: "N".into(),
            role: Role::Owner,
            password_hash: "x".into(),
            created_at: Timestamp::t0(),
        }
    }

    #[test]
    fn the_first_owner_is_made_once_and_emails_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        assert!(!is_set_up(&db).unwrap());
        create_user(&db, &user("a@x.io"), true).unwrap();
        assert!(is_set_up(&db).unwrap());
        assert!(matches!(
            create_user(&db, &user("b@x.io"), true),
            Err(AccountError::AlreadySetUp)
        ));
        assert!(matches!(
            create_user(&db, &user("a@x.io"), false),
            Err(AccountError::EmailTaken)
        ));
        create_user(&db, &user("c@x.io"), false).unwrap();
        assert_eq!(list_users(&db).unwrap().len(), 2);
        assert!(user_by_email(&db, "c@x.io").unwrap().is_some());
    }

    #[test]
    fn the_last_owner_stays_and_a_removed_account_loses_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let (owner, mut member) = (user("o@x.io"), user("m@x.io"));
        member.role = Role::Member;
        create_user(&db, &owner, true).unwrap();
        create_user(&db, &member, false).unwrap();
        let now = Timestamp::t0();
        let mut keys = Vec::new();
        for u in [&owner, &member, &member] {
            let (s, id) = Session::start(&u.id, now);
            insert_session(&db, &session_key(&id), &s).unwrap();
            keys.push(session_key(&id));
        }
        assert!(matches!(
            delete_user(&db, &owner.id),
            Err(AccountError::LastOwner)
        ));
        assert_eq!(end_sessions(&db, &member.id, Some(&keys[1])).unwrap(), 1);
        assert!(session(&db, &keys[1], now).unwrap().is_some());
        delete_user(&db, &member.id).unwrap();
        assert!(session(&db, &keys[1], now).unwrap().is_none());
        assert!(session(&db, &keys[0], now).unwrap().is_some());
        assert!(user_by_email(&db, "m@x.io").unwrap().is_none());
        assert!(matches!(
            delete_user(&db, &member.id),
            Err(AccountError::NoSuchUser)
        ));
    }

    #[test]
    fn a_session_is_found_by_its_hash_and_gone_after_sign_out_or_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let u = user("a@x.io");
        create_user(&db, &u, true).unwrap();
        let now = Timestamp::t0();
        let (s, id) = Session::start(&u.id, now);
        insert_session(&db, &session_key(&id), &s).unwrap();
        assert!(
            session(&db, &id, now).unwrap().is_none(),
            "the raw id is not a key"
        );
        assert_eq!(
            session(&db, &session_key(&id), now).unwrap().unwrap().1.id,
            u.id
        );
        let later = Timestamp::from_micros(now.micros() + 13 * 3600 * 1_000_000);
        assert!(session(&db, &session_key(&id), later).unwrap().is_none());
        let (s2, id2) = Session::start(&u.id, now);
        insert_session(&db, &session_key(&id2), &s2).unwrap();
        delete_session(&db, &session_key(&id2)).unwrap();
        assert!(session(&db, &session_key(&id2), now).unwrap().is_none());
        let (s3, id3) = Session::start(&u.id, now);
        insert_session(&db, &session_key(&id3), &s3).unwrap();
        assert_eq!(sweep_sessions(&db, later).unwrap(), 1);
        assert!(is_set_up(&db).unwrap(), "the sweep keeps the setup marker");
        assert_eq!(list_users(&db).unwrap().len(), 1);
    }
}
