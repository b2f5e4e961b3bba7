//! Surveys in sled, tree `surveys`.
//!
//! Keys (`app` and ids are 24-character ObjectIds):
//! - `s` app surveyId -> the survey (JSON)
//! - `a` app          -> number of the app's active and paused surveys (u64, big endian), the
//!   count the plan's `active_surveys` limit is checked against
//! - `r` app surveyId responseId -> a response (JSON)
//! - `v` app surveyId visitor    -> the id of the visitor's response (`u:<userId>` or
//!   `a:<anonymousId>`: one response per visitor)
//! - `m` app YYYYMM              -> responses created that month (u64, big endian), for the
//!   plan's `responses_per_month`
//!
//! A response, its visitor entry, the survey's `responseCount` and the month's count are
//! written in one transaction.
//!
//! Surveys are few per app (drafts, and a plan-limited number of live ones), so a list reads
//! the app's surveys and orders them in memory (`model::page`).

use sled::transaction::{ConflictableTransactionError, TransactionalTree};
use sled::Transactional;

use super::model::{
    self, Rejection, ResponseDraft, ResponseItem, Survey, SurveyPatch, SurveyResponse,
    SurveyStatus, UPLINK_KIND,
};
use crate::config::Quota;
use crate::ids::{self, Timestamp};
use crate::storage::changes::{self, types, Actor, Change, Facets};
use crate::storage::queue::Queue;
use crate::storage::{decode, decode_all, encode, StoreError};
use crate::validation::FieldError;

pub const TREE: &str = "surveys";

#[derive(Debug)]
pub enum SurveyError {
    NotFound,
    Invalid(Vec<FieldError>),
    Conflict(String),
    /// A visitor outside the survey's targeting: why.
    Forbidden(String),
    PlanLimit {
        quota: Quota,
        limit: u64,
        current: u64,
    },
    Store(StoreError),
}

crate::storage::store_error!(SurveyError);

impl From<Rejection> for SurveyError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::Invalid(d) => SurveyError::Invalid(d),
            Rejection::Conflict(m) => SurveyError::Conflict(m),
        }
    }
}

type Tx<T> = Result<T, ConflictableTransactionError<SurveyError>>;

fn survey_key(app: &str, id: &str) -> Vec<u8> {
    [b"s", app.as_bytes(), id.as_bytes()].concat()
}

fn live_key(app: &str) -> Vec<u8> {
    [b"a", app.as_bytes()].concat()
}

fn decode_count(v: Option<&[u8]>) -> u64 {
    v.and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

fn abort<T>(e: SurveyError) -> Tx<T> {
    Err(ConflictableTransactionError::Abort(e))
}

fn load_tx(tx: &TransactionalTree, app: &str, id: &str) -> Tx<Survey> {
    let key = survey_key(app, id);
    match tx.get(&key)? {
        Some(v) => decode(&key, &v).or_else(|e| abort(SurveyError::Store(e))),
        None => abort(SurveyError::NotFound),
    }
}

/// Runs `f` over survey `id` of `app` in one transaction (a malformed or unknown id:
/// `NotFound`), then flushes.
fn with_survey<T>(
    db: &sled::Db,
    app: &str,
    id: &str,
    f: impl Fn(&TransactionalTree, Survey) -> Tx<T>,
) -> Result<T, SurveyError> {
    if !ids::is_object_id(id) {
        return Err(SurveyError::NotFound);
    }
    let out = db
        .open_tree(TREE)?
        .transaction(|tx| f(tx, load_tx(tx, app, id)?))?;
    db.flush()?;
    Ok(out)
}

/// Stores a new survey.
pub fn create(db: &sled::Db, app: &str, survey: &Survey) -> Result<(), StoreError> {
    db.open_tree(TREE)?
        .insert(survey_key(app, &survey.id), encode(survey))?;
    db.flush()?;
    Ok(())
}

/// A survey of `app` (`None`: no such survey in this app).
pub fn get(db: &sled::Db, app: &str, id: &str) -> Result<Option<Survey>, StoreError> {
    if !ids::is_object_id(id) {
        return Ok(None);
    }
    let key = survey_key(app, id);
    match db.open_tree(TREE)?.get(&key)? {
        Some(v) => Ok(Some(decode(&key, &v)?)),
        None => Ok(None),
    }
}

/// Every survey of `app`, in id order.
pub fn all(db: &sled::Db, app: &str) -> Result<Vec<Survey>, StoreError> {
    decode_all(&db.open_tree(TREE)?, &[b"s", app.as_bytes()].concat())
}

/// Applies a PATCH in a transaction (the state rules of `Survey::apply`).
pub fn update(
    db: &sled::Db,
    app: &str,
    id: &str,
    patch: &SurveyPatch,
    now: Timestamp,
) -> Result<Survey, SurveyError> {
    with_survey(db, app, id, |tx, mut s| {
        if let Err(r) = s.apply(patch, now) {
            return abort(r.into());
        }
        tx.insert(survey_key(app, id), encode(&s))?;
        Ok(s)
    })
}

/// Moves a survey to `to` in a transaction with the count of live surveys; entering the
/// live states from draft or closed is checked against `limit` (the plan's `active_surveys`).
pub fn transition(
    db: &sled::Db,
    app: &str,
    id: &str,
    to: SurveyStatus,
    limit: Option<u64>,
    now: Timestamp,
) -> Result<Survey, SurveyError> {
    with_survey(db, app, id, |tx, mut s| {
        let was = s.status.holds_slot();
        if let Err(m) = s.move_to(to, now) {
            return abort(SurveyError::Conflict(m));
        }
        let n = decode_count(tx.get(live_key(app))?.as_deref());
        let n = match (was, s.status.holds_slot()) {
            (false, true) => {
                if let Some(limit) = limit.filter(|l| n >= *l) {
                    return abort(SurveyError::PlanLimit {
                        quota: Quota::ActiveSurveys,
                        limit,
                        current: n,
                    });
                }
                n + 1
            }
            (true, false) => n.saturating_sub(1),
            _ => n,
        };
        tx.insert(live_key(app), &n.to_be_bytes()[..])?;
        tx.insert(survey_key(app, id), encode(&s))?;
        Ok(s)
    })
}

/// Deletes a draft (409 for any other status).
pub fn delete(db: &sled::Db, app: &str, id: &str) -> Result<(), SurveyError> {
    with_survey(db, app, id, |tx, s| {
        if s.status != SurveyStatus::Draft {
            return abort(SurveyError::Conflict(format!(
                "only a draft can be deleted; this survey is {} (close it instead)",
                s.status.name()
            )));
        }
        tx.remove(survey_key(app, id))?;
        Ok(())
    })
}

fn response_prefix(app: &str, survey: &str) -> Vec<u8> {
    [b"r", app.as_bytes(), survey.as_bytes()].concat()
}

fn visitor_key(app: &str, survey: &str, visitor: &str) -> Vec<u8> {
    [b"v", app.as_bytes(), survey.as_bytes(), visitor.as_bytes()].concat()
}

fn month_key(app: &str, month: &str) -> Vec<u8> {
    [b"m", app.as_bytes(), month.as_bytes()].concat()
}

/// `respond`, and on an edge (`uplink`) the response, once stored, is pushed for the control
/// node (`ResponseItem`).
pub fn respond_on(
    db: &sled::Db,
    (app, id): (&str, &str),
    draft: &ResponseDraft,
    now: Timestamp,
    limit: Option<u64>,
    uplink: Option<Queue>,
) -> Result<(SurveyResponse, bool), SurveyError> {
    let answer = respond(db, app, id, draft, now, limit)?;
    if let Some(q) = uplink {
        let item = ResponseItem {
            app_id: app.to_owned(),
            survey_id: id.to_owned(),
            draft: draft.clone(),
            at: now.micros(),
        };
        q.push(db, UPLINK_KIND, item.at, &encode(&item))?;
    }
    Ok(answer)
}

/// Stores a visitor's answers to survey `id`: a new response (counted in the survey's
/// `responseCount` and against `limit`, the plan's `responses_per_month`, for the month of
/// `now`, when it is made or changed) or an
/// update of the visitor's earlier one, in one transaction. Drafts and unknown surveys are
/// 404, paused and closed ones 409; a new response from a visitor outside the survey's
/// targeting (as the widget's list would compute it from the body and the profile store) is
/// `Forbidden`. A response belongs to the anonymousId that created it: a userId, which anyone
/// may claim, never reaches another visitor's response. Answers the response and whether it
/// is new.
pub fn respond(
    db: &sled::Db,
    app: &str,
    id: &str,
    draft: &ResponseDraft,
    now: Timestamp,
    limit: Option<u64>,
) -> Result<(SurveyResponse, bool), SurveyError> {
    let month = now.time().format("%Y%m").to_string();
    if !ids::is_object_id(id) {
        return Err(SurveyError::NotFound);
    }
    let who = Visitor {
        anonymous_id: draft.anonymous_id.clone(),
        user_id: draft.user_id.clone(),
        attrs: draft.attributes.clone(),
        url: draft.metadata.url.clone(),
    };
    let (visitor, traits) = identity(db, app, &who)?;
    let anon = visitor_key(app, id, &model::visitor(None, &draft.anonymous_id));
    // Earlier versions indexed a signed-in visitor's response by userId only.
    let by_user = draft
        .user_id
        .as_deref()
        .map(|u| visitor_key(app, id, &model::visitor(Some(u), &draft.anonymous_id)));
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let out = (&tree, &changes).transaction(|(tx, ch)| {
        let mut survey = load_tx(tx, app, id)?;
        match survey.status {
            SurveyStatus::Active => {}
            SurveyStatus::Draft => return abort(SurveyError::NotFound),
            other => {
                return abort(SurveyError::Conflict(format!(
                    "the survey is {}; it takes no responses",
                    other.name()
                )))
            }
        }
        let keys = std::iter::once(&anon).chain(&by_user);
        let existing = existing_tx(tx, (app, id), keys, &draft.anonymous_id)?;
        let (created, was_completed) = (
            existing.is_none(),
            existing.as_ref().is_some_and(|r| r.completed),
        );
        if created {
            if let Some(why) = survey.outside(&visitor, &traits, who.url.as_deref()) {
                return abort(SurveyError::Forbidden(why));
            }
        }
        let mut response = match model::respond(&survey, existing, draft, now) {
            Ok(r) => r,
            Err(d) => return abort(SurveyError::Invalid(d)),
        };
        if response.user_id.is_none() {
            response.user_id = draft.user_id.clone();
        }
        if created {
            let mkey = month_key(app, &month);
            let n = decode_count(tx.get(&mkey)?.as_deref());
            if let Some(limit) = limit.filter(|l| n >= *l) {
                return abort(SurveyError::PlanLimit {
                    quota: Quota::ResponsesPerMonth,
                    limit,
                    current: n,
                });
            }
            tx.insert(mkey, &(n + 1).to_be_bytes()[..])?;
            survey.response_count += 1;
            tx.insert(survey_key(app, id), encode(&survey))?;
        }
        let rkey = [response_prefix(app, id), response.id.as_bytes().to_vec()].concat();
        tx.insert(rkey, encode(&response))?;
        tx.insert(anon.as_slice(), response.id.as_bytes())?;
        // The userId index only tells the widget's list that this user answered.
        if let Some(key) = &by_user {
            tx.insert(key.as_slice(), response.id.as_bytes())?;
        }
        let kinds = [
            (created, types::RESPONSE_CREATED),
            (
                response.completed && !was_completed,
                types::RESPONSE_COMPLETED,
            ),
        ];
        for (_, kind) in kinds.into_iter().filter(|(happened, _)| *happened) {
            record_tx(ch, (app, kind), &response, now)?;
        }
        Ok((response, created))
    })?;
    db.flush()?;
    Ok(out)
}

/// The visitor's response to survey `id` (`app`) under one of `keys`, if it is the one of
/// their `anonymous_id`.
fn existing_tx<'a>(
    tx: &TransactionalTree,
    (app, id): (&str, &str),
    keys: impl Iterator<Item = &'a Vec<u8>>,
    anonymous_id: &str,
) -> Tx<Option<SurveyResponse>> {
    for key in keys {
        let Some(rid) = tx.get(key)? else { continue };
        let rkey = [response_prefix(app, id), rid.to_vec()].concat();
        if let Some(v) = tx.get(&rkey)? {
            let r =
                decode::<SurveyResponse>(&rkey, &v).or_else(|e| abort(SurveyError::Store(e)))?;
            if r.anonymous_id == anonymous_id {
                return Ok(Some(r));
            }
        }
    }
    Ok(None)
}

/// Records the event `kind` about response `r` (of `app`), made at `now` by its visitor, in
/// the changes' tree `ch`: the response as the API shows it, its survey and its score.
fn record_tx(
    ch: &TransactionalTree,
    (app, kind): (&str, &str),
    r: &SurveyResponse,
    now: Timestamp,
) -> Tx<()> {
    let by = Actor::Visitor {
        id: Some(r.user_id.clone().unwrap_or_else(|| r.anonymous_id.clone())),
    };
    let mut data = changes::data("response", r);
    if let Some(m) = data.as_object_mut() {
        m.insert("surveyId".into(), r.survey_id.clone().into());
        m.insert("score".into(), r.score.into());
    }
    let change = Change::new(kind, app, &r.id, now, &by, data).with(Facets::survey(&r.survey_id));
    changes::record::<SurveyError>(ch, &change)?;
    Ok(())
}

/// Every response to survey `id` of `app`.
pub fn responses(db: &sled::Db, app: &str, id: &str) -> Result<Vec<SurveyResponse>, StoreError> {
    decode_all(&db.open_tree(TREE)?, &response_prefix(app, id))
}

/// Removes `app`'s responses last changed before `cutoff` (the retention sweep); see
/// [`drop_responses`].
pub fn drop_responses_before(
    db: &sled::Db,
    app: &str,
    cutoff: Timestamp,
) -> Result<usize, StoreError> {
    drop_responses(db, app, |r| r.updated_at < cutoff)
}

/// Removes `app`'s responses that `gone` picks (the retention sweep, an erasure), each with its
/// visitor entries and one off its survey's `responseCount`, one transaction per survey (a
/// response changed meanwhile stays); the month's quota count stays. Returns how many went.
pub fn drop_responses(
    db: &sled::Db,
    app: &str,
    gone: impl Fn(&SurveyResponse) -> bool,
) -> Result<usize, StoreError> {
    let mut dropped = 0;
    for survey in all(db, app)? {
        let id = survey.id.as_str();
        let old: Vec<SurveyResponse> = responses(db, app, id)?
            .into_iter()
            .filter(|r| gone(r))
            .collect();
        if old.is_empty() {
            continue;
        }
        let gone = with_survey(db, app, id, |tx, mut s| {
            let mut n = 0;
            for r in &old {
                let rkey = [response_prefix(app, id), r.id.as_bytes().to_vec()].concat();
                match tx.get(&rkey)? {
                    Some(v) if decode::<SurveyResponse>(&rkey, &v).is_ok_and(|now| now == *r) => {}
                    _ => continue,
                }
                tx.remove(rkey)?;
                let visitors = [None, r.user_id.as_deref()]
                    .map(|u| visitor_key(app, id, &model::visitor(u, &r.anonymous_id)));
                for key in visitors {
                    if tx.get(&key)?.is_some_and(|rid| *rid == *r.id.as_bytes()) {
                        tx.remove(key)?;
                    }
                }
                n += 1;
            }
            s.response_count = s.response_count.saturating_sub(n as u64);
            tx.insert(survey_key(app, id), encode(&s))?;
            Ok(n)
        });
        dropped += match gone {
            Ok(n) => n,
            Err(SurveyError::Store(e)) => return Err(e),
            // Deleted meanwhile (a draft, which holds no responses).
            Err(_) => 0,
        };
    }
    Ok(dropped)
}

/// Who asks the widget for surveys: the canonical anonymousId, the userId when known, the
/// `attr.<key>` attributes and the page's URL.
#[derive(Debug, Clone, Default)]
pub struct Visitor {
    pub anonymous_id: String,
    pub user_id: Option<String>,
    pub attrs: serde_json::Map<String, serde_json::Value>,
    pub url: Option<String>,
}

/// The active surveys of `app` that target the visitor (sampling and attribute rules over
/// the visitor's profile traits, overridden by `attrs`; URL rules over the page's URL) and
/// that the visitor has not completed.
pub fn eligible(db: &sled::Db, app: &str, who: &Visitor) -> Result<Vec<Survey>, StoreError> {
    let anonymous_id = who.anonymous_id.as_str();
    let (visitor, traits) = identity(db, app, who)?;
    let tree = db.open_tree(TREE)?;
    let mut out = Vec::new();
    for s in all(db, app)? {
        if !s.targets(&visitor, &traits, who.url.as_deref()) {
            continue;
        }
        let mut done = false;
        for v in [visitor.clone(), model::visitor(None, anonymous_id)] {
            if let Some(rid) = tree.get(visitor_key(app, &s.id, &v))? {
                let key = [response_prefix(app, &s.id), rid.to_vec()].concat();
                if let Some(r) = tree.get(&key)? {
                    done |= decode::<SurveyResponse>(&key, &r)?.completed;
                }
            }
        }
        if !done {
            out.push(s);
        }
    }
    Ok(out)
}

/// Who the visitor is to a survey's targeting: the sampling identity (`u:<userId>`, the
/// userId from the profile store when the request has none, else `a:<anonymousId>`) and the
/// attributes (the user's profile traits, overridden by `who.attrs`).
fn identity(
    db: &sled::Db,
    app: &str,
    who: &Visitor,
) -> Result<(String, serde_json::Map<String, serde_json::Value>), StoreError> {
    let anonymous_id = who.anonymous_id.as_str();
    let user = match &who.user_id {
        Some(u) => Some(u.to_owned()),
        None => crate::profiles::store::user_of(db, app, anonymous_id)?,
    };
    let mut traits = match &user {
        Some(u) => crate::profiles::store::get(db, app, u)?
            .map(|p| p.traits)
            .unwrap_or_default(),
        None => serde_json::Map::new(),
    };
    traits.extend(who.attrs.clone());
    Ok((model::visitor(user.as_deref(), anonymous_id), traits))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::changes::{recorded, Actor};
    use crate::surveys::model::{ResponseMetadata, SurveyPatch};

    fn nps(db: &sled::Db, app: &str) -> Survey {
        let body = json!({"title": "NPS", "type": "nps", "questions": [
            {"id": "score", "text": "How likely?", "type": "scale", "required": true},
            {"id": "why", "text": "Why?", "type": "text"}
        ]});
        let patch = SurveyPatch::parse(body.as_object().unwrap(), true).unwrap();
        let survey = patch.into_survey(Timestamp::t0()).unwrap();
        create(db, app, &survey).unwrap();
        transition(
            db,
            app,
            &survey.id,
            SurveyStatus::Active,
            None,
            Timestamp::t0(),
        )
        .unwrap();
        survey
    }

    fn draft(answers: &[(&str, serde_json::Value)], completed: bool) -> ResponseDraft {
        ResponseDraft {
            anonymous_id: "6f1c2d3e-4b5a-4c6d-8e7f-000000000001".into(),
            user_id: None,
            answers: answers
                .iter()
                .map(|(q, v)| ((*q).to_owned(), v.clone()))
                .collect(),
            completed,
            metadata: ResponseMetadata::default(),
            attributes: serde_json::Map::new(),
        }
    }

    #[test]
    fn a_response_records_created_once_then_completed_once_with_its_score() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let app = ids::object_id();
        let survey = nps(&db, &app);
        let now = Timestamp::t0();
        let partial = draft(&[("why", json!("fast"))], false);
        let (first, created) = respond(&db, &app, &survey.id, &partial, now, None).unwrap();
        assert!(created);
        let visitor = Actor::Visitor {
            id: Some(partial.anonymous_id.clone()),
        };
        let [c] = &recorded(&db)[..] else { panic!() };
        assert_eq!(
            (c.kind.as_str(), c.subject.as_str(), c.actor.clone()),
            (
                "survey.response.created",
                first.id.as_str(),
                visitor.clone()
            )
        );
        assert_eq!(c.facets.survey_id.as_deref(), Some(survey.id.as_str()));
        let want = json!({"response": first, "surveyId": survey.id, "score": null});
        assert_eq!(c.data, want);

        let refused = respond(
            &db,
            &app,
            &survey.id,
            &draft(&[("score", json!(11))], true),
            now,
            None,
        );
        assert!(refused.is_err());
        assert_eq!(recorded(&db).len(), 1, "a refused answer records nothing");

        let done = draft(&[("score", json!(9))], true);
        let (full, created) = respond(&db, &app, &survey.id, &done, now, None).unwrap();
        assert!(!created && full.completed);
        let all = recorded(&db);
        let [_, c] = &all[..] else { panic!("{all:?}") };
        assert_eq!(
            (c.kind.as_str(), c.actor.clone()),
            ("survey.response.completed", visitor)
        );
        assert_eq!(
            c.data,
            json!({"response": full, "surveyId": survey.id, "score": 9.0})
        );

        respond(
            &db,
            &app,
            &survey.id,
            &draft(&[("why", json!("x"))], true),
            now,
            None,
        )
        .unwrap();
        assert_eq!(
            recorded(&db).len(),
            2,
            "an update of a completed response records nothing"
        );
    }

    #[test]
    fn a_first_answer_that_completes_records_created_then_completed() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let app = ids::object_id();
        let survey = nps(&db, &app);
        let done = draft(&[("score", json!(3)), ("why", json!("slow"))], true);
        respond(&db, &app, &survey.id, &done, Timestamp::t0(), None).unwrap();
        let kinds: Vec<_> = recorded(&db)
            .into_iter()
            .map(|c| (c.kind, c.data["score"].clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("survey.response.created".to_owned(), json!(3.0)),
                ("survey.response.completed".to_owned(), json!(3.0))
            ]
        );
    }
}
