//! An erasure's sled side: the person's ids while the job runs (tree `erasure_subjects`, job id
//! -> [`Person`] as JSON, removed when the job ends: the job record itself keeps only hashes),
//! and the erasure of every store that holds the person, each through its own store's
//! functions (contacts, profiles, survey responses, votes and comments, idempotency answers,
//! the quarantine's refused events). Each store's part is idempotent: run again, it removes
//! nothing more.

use super::model::{Counted, Person};
use crate::jobs::{Job, JobKind};
use crate::storage::{decode, encode, StoreError};

pub const SUBJECTS: &str = "erasure_subjects";

#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A store answered something an erasure does not expect (named).
    #[error("{0}")]
    Other(String),
}

/// Keeps the person an erasure job looks for, until the job ends.
pub fn keep_subject(db: &sled::Db, job_id: &str, person: &Person) -> Result<(), StoreError> {
    db.open_tree(SUBJECTS)?.insert(job_id, encode(person))?;
    db.flush()?;
    Ok(())
}

/// The record that keeps `person` for the new erasure `job`, written with the job
/// (`Jobs::submit_with`).
pub fn subject_of(job: &Job, person: &Person) -> crate::jobs::store::Companion {
    (SUBJECTS, job.id.as_bytes().to_vec(), encode(person))
}

/// Forgets every subject whose job is gone or finished (a crash between a job's failure and
/// its subject's removal); answers how many. Run at start.
pub fn sweep_subjects(db: &sled::Db) -> Result<usize, StoreError> {
    let tree = db.open_tree(SUBJECTS)?;
    let mut gone = 0;
    for entry in tree.iter() {
        let (key, _) = entry?;
        let id = String::from_utf8_lossy(&key);
        if crate::jobs::store::get(db, &id)?.is_none_or(|j| j.state.finished()) {
            tree.remove(&key)?;
            gone += 1;
        }
    }
    db.flush()?;
    Ok(gone)
}

/// The person of erasure job `job_id`, while it runs.
pub fn subject(db: &sled::Db, job_id: &str) -> Result<Option<Person>, StoreError> {
    match db.open_tree(SUBJECTS)?.get(job_id)? {
        Some(v) => Ok(Some(decode(job_id.as_bytes(), &v)?)),
        None => Ok(None),
    }
}

/// Forgets the person of a finished job.
pub fn forget_subject(db: &sled::Db, job_id: &str) -> Result<(), StoreError> {
    db.open_tree(SUBJECTS)?.remove(job_id)?;
    db.flush()?;
    Ok(())
}

/// The person with every anonymousId linked to its userId (profile and identity links).
pub fn resolve(db: &sled::Db, app: &str, person: &Person) -> Result<Person, StoreError> {
    let mut out = person.clone();
    if let Some(u) = &person.user_id {
        out.anonymous_ids
            .extend(crate::profiles::store::linked(db, app, u)?);
    }
    Ok(out)
}

/// Whether a refused event the quarantine kept is about the person: its JSON names one of the
/// ids or the e-mail as a string value (a cut excerpt is searched as text).
fn about(person: &Person, event: &str) -> bool {
    let ids = person
        .user_id
        .iter()
        .chain(&person.anonymous_ids)
        .chain(&person.email);
    ids.into_iter()
        .any(|id| event.contains(&serde_json::Value::from(id.as_str()).to_string()))
}

/// Erases the person from every store of `app` in sled (the lake is `lake.rs`'s); answers what
/// each removed.
pub fn erase(db: &sled::Db, app: &str, person: &Person) -> Result<Vec<(Counted, u64)>, EraseError> {
    let mut answers = 0;
    let mut contacts = 0;
    let mut contact_ids = Vec::new();
    if let Some(email) = person.email.as_deref() {
        let email = crate::contacts::model::Email::parse(email)
            .map_err(|m| EraseError::Other(format!("email: {m}")))?;
        if let Some(c) = crate::contacts::store::find_by_email(db, app, &email)? {
            answers += crate::storage::idempotency::forget_holding(db, app, &c.id)?;
            contact_ids.push(c.id.clone());
            match crate::contacts::store::erase(db, app, &c.id) {
                Ok(()) => contacts += 1,
                Err(crate::contacts::store::ContactError::NotFound) => {}
                Err(crate::contacts::store::ContactError::Store(e)) => return Err(e.into()),
                Err(e) => return Err(EraseError::Other(format!("contacts: {e:?}"))),
            }
        }
    }
    let anon: Vec<&str> = person.anonymous_ids.iter().map(String::as_str).collect();
    let (profiles, links) =
        crate::profiles::store::erase(db, app, person.user_id.as_deref(), &anon)?;
    let user = person.user_id.as_deref();
    let responses = crate::surveys::store::drop_responses(db, app, |r| {
        person.anonymous_ids.contains(&r.anonymous_id)
            || (user.is_some() && r.user_id.as_deref() == user)
    })?;
    let ideas = crate::ideas::engagement::erase_person(db, app, user, person.email.as_deref())
        .map_err(|e| match e {
            crate::ideas::store::IdeaError::Store(e) => EraseError::Store(e),
            other => EraseError::Other(format!("ideas: {other:?}")),
        })?;
    let refused = crate::collector::quarantine::forget(db, app, |r| about(person, &r.event))?;
    let mut named: Vec<&str> = anon.clone();
    named.extend(user);
    named.extend(person.email.as_deref());
    named.extend(contact_ids.iter().map(String::as_str));
    let webhooks = crate::webhooks::store::forget_mentions(db, app, &named)?;
    db.flush().map_err(StoreError::from)?;
    Ok(vec![
        (Counted::Contacts, contacts),
        (Counted::Profiles, profiles as u64),
        (Counted::IdentityLinks, links as u64),
        (Counted::SurveyResponses, responses as u64),
        (Counted::Votes, ideas.votes as u64),
        (Counted::Comments, ideas.comments as u64),
        (Counted::IdeasAnonymised, ideas.ideas as u64),
        (
            Counted::IdempotencyAnswers,
            (answers + ideas.answers) as u64,
        ),
        (Counted::RefusedEvents, refused as u64),
        (Counted::WebhookEvents, webhooks),
    ])
}

/// A page of `app`'s erasure jobs, oldest first (the job ids' order).
pub fn erasures(
    db: &sled::Db,
    app: &str,
    walk: crate::storage::cursor::Walk,
) -> Result<crate::storage::cursor::Page<Job>, StoreError> {
    let tree = db.open_tree(crate::jobs::store::TREE)?;
    let prefix = crate::jobs::model::ID_PREFIX.as_bytes();
    crate::storage::cursor::page(&tree, prefix, walk, |entry, v| {
        let job: Job = decode(entry, v)?;
        Ok((job.app_id == app && job.kind == JobKind::Erasure).then_some(job))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_event_is_about_the_person_when_its_json_names_an_id_as_a_value() {
        let p = Person {
            user_id: Some("u1".into()),
            anonymous_ids: ["a\"1".to_owned()].into(),
            email: None,
        };
        assert!(about(&p, r#"{"userId":"u1","type":"x"}"#));
        assert!(about(&p, r#"{"anonymousId":"a\"1"}"#));
        assert!(!about(&p, r#"{"userId":"u10"}"#));
        assert!(!about(&p, r#"{"event":"u1 signed up"}"#));
    }

    /// Every tree's entries whose key or value holds `needle`.
    fn holding(db: &sled::Db, needle: &str) -> Vec<String> {
        let mut out = Vec::new();
        for name in db.tree_names() {
            for (k, v) in db.open_tree(&name).unwrap().iter().flatten() {
                let (k, v) = (String::from_utf8_lossy(&k), String::from_utf8_lossy(&v));
                if k.contains(needle) || v.contains(needle) {
                    out.push(format!("{}/{k}", String::from_utf8_lossy(&name)));
                }
            }
        }
        out
    }

    fn person() -> Person {
        Person {
            user_id: Some("raw-user-42".into()),
            anonymous_ids: ["raw-anon-42".to_owned()].into(),
            email: Some("raw42@example.com".into()),
        }
    }

    fn job_with_subject(db: &sled::Db, app: &str) -> Job {
        let job = Job::new(
            JobKind::Erasure,
            app,
            serde_json::Value::Null,
            crate::ids::Timestamp::from_micros(0),
        );
        crate::jobs::store::insert_with(db, &job, &[subject_of(&job, &person())], None).unwrap();
        job
    }

    #[test]
    fn a_subject_is_kept_under_its_jobs_id_so_an_app_deletion_forgets_it() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let job = job_with_subject(&db, "app1");
        assert_eq!(subject(&db, &job.id).unwrap(), Some(person()));
        // What an app deletion does with each job of the app.
        for other in crate::jobs::store::of_app(&db, "app1", None).unwrap() {
            assert!(crate::jobs::store::delete(&db, &other.id).unwrap());
            forget_subject(&db, &other.id).unwrap();
        }
        for raw in ["raw-user-42", "raw-anon-42", "raw42@example.com"] {
            assert_eq!(holding(&db, raw), Vec::<String>::new(), "{raw}");
        }
    }

    #[test]
    fn the_start_sweep_forgets_subjects_of_failed_or_missing_jobs_only() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let running = job_with_subject(&db, "app1");
        let mut failed = job_with_subject(&db, "app1");
        failed.state = crate::jobs::JobState::Failed;
        crate::jobs::store::save(&db, &failed).unwrap();
        keep_subject(&db, "job_orphan", &person()).unwrap();
        assert_eq!(sweep_subjects(&db).unwrap(), 2);
        assert_eq!(subject(&db, &running.id).unwrap(), Some(person()));
        forget_subject(&db, &running.id).unwrap();
        assert_eq!(holding(&db, "raw-user-42"), Vec::<String>::new());
    }

    #[test]
    fn a_subject_is_kept_while_the_job_runs() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let p = Person {
            user_id: Some("u".into()),
            ..Person::default()
        };
        keep_subject(&db, "job_1", &p).unwrap();
        assert_eq!(subject(&db, "job_1").unwrap(), Some(p));
        forget_subject(&db, "job_1").unwrap();
        assert_eq!(subject(&db, "job_1").unwrap(), None);
    }
}
