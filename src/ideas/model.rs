//! Ideas, votes, comments and status changes as typed values, their validation (api.md §6) and
//! the trending score. No sled, no HTTP.
//!
//! Trending: each vote weighs `2^(-age / 72 h)` (its weight halves every three days) and an
//! idea's trending score is the sum over its votes. Since `2^(-(now - t)/H) = 2^(-now/H) * 2^(t/H)`,
//! the order of two ideas never changes as time passes without votes, so the score is kept as
//! `log2 Σ 2^((t_vote - 2020-01-01)/H)`, updated in the vote's transaction and indexed like any
//! sort key (a cursor walk by trending is as stable as one by vote count).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::boards::BoardRecord;
use crate::ids::{self, Timestamp};
use crate::validation::{check_text, normalize_email, only_fields, type_name, FieldError};

pub const MIN_TITLE_CHARS: usize = 3;
pub const MAX_TITLE_CHARS: usize = 150;
pub const MAX_DESCRIPTION_CHARS: usize = 10_000;
pub const MAX_COMMENT_CHARS: usize = 5_000;
pub const MAX_TAGS_PER_IDEA: usize = 20;
pub const MAX_PERSON_ID_CHARS: usize = 128;
pub const MAX_PERSON_NAME_CHARS: usize = 100;
/// Half-life of a vote's weight in the trending score.
pub const TRENDING_HALF_LIFE_HOURS: f64 = 72.0;

/// Someone named in a body: the author of an idea or a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Person {
    pub id: String,
    pub name: String,
    pub email: String,
}

/// Who votes: an id, an e-mail or both (a voter is the same when either matches).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Voter {
    pub id: Option<String>,
    pub name: Option<String>,
    /// Normalised (trimmed, lowercased).
    pub email: Option<String>,
}

impl Voter {
    /// The keys that identify the voter: `i<id>` and `e<email>`.
    pub fn keys(&self) -> Vec<String> {
        let id = self.id.iter().map(|i| format!("i{i}"));
        id.chain(self.email.iter().map(|e| format!("e{e}")))
            .collect()
    }
}

/// An idea as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Idea {
    pub id: String,
    pub board_id: String,
    pub title: String,
    pub description: Option<String>,
    pub status_id: String,
    pub topic_id: Option<String>,
    pub tag_ids: Vec<String>,
    pub author: Person,
    pub vote_count: u64,
    /// Public comments only.
    pub comment_count: u64,
    pub internal_comment_count: u64,
    /// `log2 Σ 2^((t_vote - 2020)/H)`; `None` without votes.
    pub trending: Option<f64>,
    pub merged_into_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// `{id, name, color}` of an idea's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StatusRef {
    pub id: String,
    pub name: String,
    pub color: String,
}

/// `{id, name}` of a topic or a tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NameRef {
    pub id: String,
    pub name: String,
}

/// An idea as the API shows it (interface §2.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdeaView {
    pub id: String,
    pub board_id: String,
    pub title: String,
    /// Absent when the idea has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub status: StatusRef,
    /// Absent when the idea has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<NameRef>,
    pub tags: Vec<NameRef>,
    pub vote_count: u64,
    /// Public (non-internal) comments.
    pub comment_count: u64,
    pub author: Person,
    /// Present once the idea was merged into another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_into_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Idea {
    /// The idea as shown, its status, topic and tags named from its board.
    pub fn view(&self, board: &BoardRecord) -> IdeaView {
        let status = board.status(&self.status_id).map_or_else(
            || StatusRef {
                id: self.status_id.clone(),
                name: String::new(),
                color: "#000000".into(),
            },
            |s| StatusRef {
                id: s.id.clone(),
                name: s.name.clone(),
                color: s.color.as_str().to_owned(),
            },
        );
        IdeaView {
            id: self.id.clone(),
            board_id: self.board_id.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            status,
            topic: self
                .topic_id
                .as_deref()
                .and_then(|t| board.topic(t))
                .map(|t| NameRef {
                    id: t.id.clone(),
                    name: t.name.clone(),
                }),
            tags: self
                .tag_ids
                .iter()
                .filter_map(|t| board.tag(t))
                .map(|t| NameRef {
                    id: t.id.clone(),
                    name: t.name.clone(),
                })
                .collect(),
            vote_count: self.vote_count,
            comment_count: self.comment_count,
            author: self.author.clone(),
            merged_into_id: self.merged_into_id.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Folded title and description contain the folded query.
    pub fn matches_text(&self, folded_query: &str) -> bool {
        fold(&self.title).contains(folded_query)
            || self
                .description
                .as_deref()
                .is_some_and(|d| fold(d).contains(folded_query))
    }
}

/// A vote (api.md §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Vote {
    pub id: String,
    pub idea_id: String,
    pub voter: Voter,
    pub created_at: Timestamp,
}

/// A comment (api.md §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    pub idea_id: String,
    pub parent_id: Option<String>,
    pub content: String,
    /// Visible only to keys with `ideas:moderate`; never counted in `commentCount`.
    pub internal: bool,
    pub author: Person,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One entry of an idea's status history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusChange {
    pub id: String,
    pub idea_id: String,
    pub from: Option<StatusRef>,
    pub to: StatusRef,
    pub changed_at: Timestamp,
}

/// Lowercase, without accents (NFD, combining marks dropped): the form `q` compares.
pub fn fold(s: &str) -> String {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    s.nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The exponent of one vote at `t`: hours since 2020-01-01 over the half-life.
fn vote_weight_exp(t: Timestamp) -> f64 {
    const EPOCH_2020_MICROS: i64 = 1_577_836_800_000_000;
    (t.micros() - EPOCH_2020_MICROS) as f64 / 3.6e9 / TRENDING_HALF_LIFE_HOURS
}

/// The trending score with one more vote at `t`.
pub fn trending_add(score: Option<f64>, t: Timestamp) -> Option<f64> {
    let x = vote_weight_exp(t);
    Some(match score {
        None => x,
        Some(s) => s.max(x) + (1.0 + (s.min(x) - s.max(x)).exp2()).log2(),
    })
}

/// The trending score without the vote at `t` (`None` once no vote is left).
pub fn trending_remove(score: Option<f64>, t: Timestamp, votes_left: u64) -> Option<f64> {
    let s = score?;
    if votes_left == 0 {
        return None;
    }
    // What the other votes weigh, relative to the whole; below 1e-12 (votes 40 half-lives
    // older than the removed one) f64 cannot tell it from rounding, so it is floored there.
    let rest = 1.0 - (vote_weight_exp(t) - s).exp2();
    Some(s + rest.max(1e-12).log2())
}

/// Collects the errors of a body, so one answer names every bad field.
#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn check<T>(&mut self, field: &str, r: Result<T, String>) -> Option<T> {
        r.map_err(|m| self.0.push(FieldError::new(field, m))).ok()
    }

    fn done<T>(self, v: T) -> Result<T, Vec<FieldError>> {
        if self.0.is_empty() {
            Ok(v)
        } else {
            Err(self.0)
        }
    }
}

fn string(v: &Value) -> Result<&str, String> {
    v.as_str()
        .ok_or_else(|| format!("must be a string, not {}", type_name(v)))
}

fn title(v: &Value) -> Result<String, String> {
    let t = check_text(string(v)?, MAX_TITLE_CHARS, false)?;
    if t.chars().count() < MIN_TITLE_CHARS {
        return Err(format!(
            "must be {MIN_TITLE_CHARS} to {MAX_TITLE_CHARS} characters"
        ));
    }
    Ok(t)
}

/// `null` or empty clears.
fn long_text(v: &Value, max: usize) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        v => Ok(Some(check_text(string(v)?, max, true)?).filter(|t| !t.is_empty())),
    }
}

fn object_id(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    ids::is_object_id(s)
        .then(|| s.to_owned())
        .ok_or_else(|| "must be an id (24 hex characters)".into())
}

fn id_list(v: &Value) -> Result<Vec<String>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("must be an array of ids, not {}", type_name(v)))?;
    if items.len() > MAX_TAGS_PER_IDEA {
        return Err(format!("must hold at most {MAX_TAGS_PER_IDEA} ids"));
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let id = object_id(item)?;
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

/// A past time for imports (`createdAt` of an idea or a vote); now when absent.
fn past_time(v: Option<&Value>) -> Result<Timestamp, String> {
    let now = Timestamp::now();
    let Some(v) = v else { return Ok(now) };
    match Timestamp::parse(string(v)?) {
        Some(t) if t <= now => Ok(t),
        Some(_) => Err("must not be in the future".into()),
        None => Err("must be an ISO 8601 timestamp".into()),
    }
}

fn short(v: &Value, max: usize) -> Result<String, String> {
    match check_text(string(v)?, max, false)? {
        t if t.is_empty() => Err(format!("must be 1 to {max} characters")),
        t => Ok(t),
    }
}

/// `{"id", "name", "email"}`, every part required; errors are named `<field>.id` and so on.
fn person(field: &str, v: Option<&Value>, errors: &mut Errors) -> Option<Person> {
    let Some(Value::Object(m)) = v else {
        errors.check::<()>(
            field,
            Err("is required: an object {id, name, email}".into()),
        );
        return None;
    };
    let mut part = |name: &str, parse: &dyn Fn(&Value) -> Result<String, String>| {
        let r = m
            .get(name)
            .map_or_else(|| Err("is required".to_owned()), parse);
        errors.check(&format!("{field}.{name}"), r)
    };
    let id = part("id", &|v| short(v, MAX_PERSON_ID_CHARS));
    let name = part("name", &|v| short(v, MAX_PERSON_NAME_CHARS));
    let email = part("email", &|v| {
        normalize_email(string(v)?).map_err(str::to_owned)
    });
    let mut unknown = Vec::new();
    only_fields(m, &["id", "name", "email"], &mut unknown);
    for e in unknown {
        errors.check::<()>(&format!("{field}.{}", e.field), Err(e.message));
    }
    Some(Person {
        id: id?,
        name: name?,
        email: email?,
    })
}

/// A validated create body of an idea.
#[derive(Debug, Clone, PartialEq)]
pub struct IdeaDraft {
    /// `None`: the default board.
    pub board_id: Option<String>,
    pub title: String,
    pub description: Option<String>,
    pub topic_id: Option<String>,
    pub tag_ids: Vec<String>,
    pub author: Person,
    /// Now, or an earlier time for imports.
    pub created_at: Timestamp,
}

impl IdeaDraft {
    pub fn parse(body: &Map<String, Value>) -> Result<IdeaDraft, Vec<FieldError>> {
        let mut e = Errors::default();
        only_fields(
            body,
            &[
                "boardId",
                "title",
                "description",
                "topicId",
                "tagIds",
                "author",
                "createdAt",
            ],
            &mut e.0,
        );
        let board_id = body
            .get("boardId")
            .and_then(|v| e.check("boardId", object_id(v)));
        let title = match body.get("title") {
            Some(v) => e.check("title", title(v)),
            None => e.check(
                "title",
                Err(format!(
                    "is required: {MIN_TITLE_CHARS} to {MAX_TITLE_CHARS} characters"
                )),
            ),
        };
        let description = body
            .get("description")
            .and_then(|v| e.check("description", long_text(v, MAX_DESCRIPTION_CHARS)));
        let topic_id = body
            .get("topicId")
            .filter(|v| !v.is_null())
            .and_then(|v| e.check("topicId", object_id(v)));
        let tag_ids = body
            .get("tagIds")
            .and_then(|v| e.check("tagIds", id_list(v)));
        let author = person("author", body.get("author"), &mut e);
        let created_at = e.check("createdAt", past_time(body.get("createdAt")));
        let (Some(title), Some(author), Some(created_at)) = (title, author, created_at) else {
            return Err(e.0);
        };
        e.done(IdeaDraft {
            board_id,
            title,
            description: description.flatten(),
            topic_id,
            tag_ids: tag_ids.unwrap_or_default(),
            author,
            created_at,
        })
    }
}

/// A validated merge patch of an idea: `Some(None)` clears.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdeaPatch {
    pub title: Option<String>,
    pub description: Option<Option<String>>,
    pub topic_id: Option<Option<String>>,
    pub tag_ids: Option<Vec<String>>,
    /// Needs `ideas:moderate`.
    pub status_id: Option<String>,
}

impl IdeaPatch {
    pub fn parse(body: &Map<String, Value>) -> Result<IdeaPatch, Vec<FieldError>> {
        let mut e = Errors::default();
        only_fields(
            body,
            &["title", "description", "topicId", "tagIds", "statusId"],
            &mut e.0,
        );
        let mut p = IdeaPatch::default();
        if let Some(v) = body.get("title") {
            p.title = e.check("title", title(v));
        }
        if let Some(v) = body.get("description") {
            p.description = e.check("description", long_text(v, MAX_DESCRIPTION_CHARS));
        }
        if let Some(v) = body.get("topicId") {
            p.topic_id = e.check(
                "topicId",
                if v.is_null() {
                    Ok(None)
                } else {
                    object_id(v).map(Some)
                },
            );
        }
        if let Some(v) = body.get("tagIds") {
            p.tag_ids = e.check(
                "tagIds",
                if v.is_null() {
                    Ok(Vec::new())
                } else {
                    id_list(v)
                },
            );
        }
        if let Some(v) = body.get("statusId") {
            p.status_id = e.check("statusId", object_id(v));
        }
        e.done(p)
    }

    /// Whether the patch touches more than the status (what `ideas:write` grants).
    pub fn changes_content(&self) -> bool {
        self.title.is_some()
            || self.description.is_some()
            || self.topic_id.is_some()
            || self.tag_ids.is_some()
    }

    /// Checks the ids against the idea's board and writes the patch; `Err` names each unknown id.
    pub fn apply(&self, idea: &mut Idea, board: &BoardRecord) -> Result<(), Vec<FieldError>> {
        let mut e = Errors::default();
        if let Some(Some(t)) = &self.topic_id {
            if board.topic(t).is_none() {
                e.check::<()>("topicId", Err("no such topic on the idea's board".into()));
            }
        }
        if let Some(tags) = &self.tag_ids {
            if let Some(bad) = tags.iter().find(|t| board.tag(t).is_none()) {
                e.check::<()>(
                    "tagIds",
                    Err(format!("no such tag on the idea's board: {bad}")),
                );
            }
        }
        if let Some(s) = &self.status_id {
            if board.status(s).is_none() {
                e.check::<()>("statusId", Err("no such status on the idea's board".into()));
            }
        }
        e.done(())?;
        if let Some(t) = &self.title {
            idea.title = t.clone();
        }
        if let Some(d) = &self.description {
            idea.description = d.clone();
        }
        if let Some(t) = &self.topic_id {
            idea.topic_id = t.clone();
        }
        if let Some(t) = &self.tag_ids {
            idea.tag_ids = t.clone();
        }
        if let Some(s) = &self.status_id {
            idea.status_id = s.clone();
        }
        Ok(())
    }
}

/// A validated vote body: `{"voter": {"id"?, "email"?, "name"?}, "createdAt"?}`.
pub fn parse_vote(body: &Map<String, Value>) -> Result<(Voter, Timestamp), Vec<FieldError>> {
    let mut e = Errors::default();
    only_fields(body, &["voter", "createdAt"], &mut e.0);
    let created_at = e.check("createdAt", past_time(body.get("createdAt")));
    let Some(Value::Object(m)) = body.get("voter") else {
        e.check::<()>(
            "voter",
            Err("is required: an object {id?, email?, name?} with an id or an e-mail".into()),
        );
        return Err(e.0);
    };
    let mut unknown = Vec::new();
    only_fields(m, &["id", "email", "name"], &mut unknown);
    e.0.extend(
        unknown
            .into_iter()
            .map(|f| FieldError::new(format!("voter.{}", f.field), f.message)),
    );
    let id = m
        .get("id")
        .filter(|v| !v.is_null())
        .and_then(|v| e.check("voter.id", short(v, MAX_PERSON_ID_CHARS)));
    let name = m
        .get("name")
        .filter(|v| !v.is_null())
        .and_then(|v| e.check("voter.name", short(v, MAX_PERSON_NAME_CHARS)));
    let email = m.get("email").filter(|v| !v.is_null()).and_then(|v| {
        e.check(
            "voter.email",
            string(v).and_then(|s| normalize_email(s).map_err(str::to_owned)),
        )
    });
    if e.0.is_empty() && id.is_none() && email.is_none() {
        e.check::<()>("voter", Err("needs an id or an e-mail".into()));
    }
    let voter = Voter { id, name, email };
    e.done((voter, created_at.unwrap_or_else(Timestamp::now)))
}

/// A validated comment body.
#[derive(Debug, Clone, PartialEq)]
pub struct CommentDraft {
    pub content: String,
    pub author: Person,
    pub parent_id: Option<String>,
    pub internal: bool,
}

fn content(v: Option<&Value>) -> Result<String, String> {
    let msg = format!("is required: 1 to {MAX_COMMENT_CHARS} characters");
    match check_text(string(v.ok_or(msg.clone())?)?, MAX_COMMENT_CHARS, true)? {
        t if t.is_empty() => Err(msg),
        t => Ok(t),
    }
}

impl CommentDraft {
    pub fn parse(body: &Map<String, Value>) -> Result<CommentDraft, Vec<FieldError>> {
        let mut e = Errors::default();
        only_fields(
            body,
            &["content", "author", "parentId", "internal"],
            &mut e.0,
        );
        let content = e.check("content", content(body.get("content")));
        let author = person("author", body.get("author"), &mut e);
        let parent_id = body
            .get("parentId")
            .filter(|v| !v.is_null())
            .and_then(|v| e.check("parentId", object_id(v)));
        let internal = match body.get("internal") {
            None | Some(Value::Null) => Some(false),
            Some(Value::Bool(b)) => Some(*b),
            Some(v) => e.check(
                "internal",
                Err(format!("must be a boolean, not {}", type_name(v))),
            ),
        };
        match (content, author, internal) {
            (Some(content), Some(author), Some(internal)) => e.done(CommentDraft {
                content,
                author,
                parent_id,
                internal,
            }),
            _ => Err(e.0),
        }
    }

    pub fn comment(&self, idea_id: &str) -> Comment {
        let now = Timestamp::now();
        Comment {
            id: ids::object_id(),
            idea_id: idea_id.to_owned(),
            parent_id: self.parent_id.clone(),
            content: self.content.clone(),
            internal: self.internal,
            author: self.author.clone(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// A comment edit: `{"content", "author": {"id"}?}`; the author id proves ownership for keys
/// without `ideas:moderate`.
pub fn parse_comment_edit(
    body: &Map<String, Value>,
) -> Result<(String, Option<String>), Vec<FieldError>> {
    let mut e = Errors::default();
    only_fields(body, &["content", "author"], &mut e.0);
    let content = e.check("content", content(body.get("content")));
    let author = match body.get("author") {
        None => None,
        Some(Value::Object(m)) => e.check(
            "author.id",
            m.get("id")
                .map_or(Err("is required".into()), |v| short(v, MAX_PERSON_ID_CHARS)),
        ),
        Some(v) => e.check(
            "author",
            Err(format!("must be an object {{id}}, not {}", type_name(v))),
        ),
    };
    match content {
        Some(c) => e.done((c, author)),
        None => Err(e.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn fields(e: Vec<FieldError>) -> Vec<String> {
        let mut f: Vec<String> = e.into_iter().map(|f| f.field).collect();
        f.sort();
        f
    }

    #[test]
    fn folding_drops_case_and_accents() {
        assert_eq!(fold("Crème BRÛLÉE Ångström"), "creme brulee angstrom");
    }

    #[test]
    fn recent_votes_outweigh_old_ones_and_removal_undoes_addition() {
        let now = Timestamp::now();
        let old = Timestamp::from_micros(now.micros() - 30 * 24 * 3_600_000_000);
        let fresh = (0..5).fold(None, |s, _| trending_add(s, now));
        let stale = (0..5).fold(None, |s, _| trending_add(s, old));
        assert!(fresh > stale);
        let one = trending_add(None, now);
        let two = trending_add(one, old);
        let back = trending_remove(two, old, 1).unwrap();
        assert!((back - one.unwrap()).abs() < 1e-9);
        assert_eq!(trending_remove(one, now, 0), None);
    }

    #[test]
    fn an_idea_body_reports_every_bad_field() {
        let e = IdeaDraft::parse(&body(json!({
            "title": "x", "description": 5, "topicId": "nope", "tagIds": ["zz"],
            "author": {"id": "", "email": "bad"}, "extra": 1
        })))
        .unwrap_err();
        assert_eq!(
            fields(e),
            [
                "author.email",
                "author.id",
                "author.name",
                "description",
                "extra",
                "tagIds",
                "title",
                "topicId"
            ]
        );
    }

    #[test]
    fn a_vote_needs_an_id_or_an_email() {
        assert_eq!(
            fields(parse_vote(&body(json!({"voter": {"name": "A"}}))).unwrap_err()),
            ["voter"]
        );
        let (v, _) = parse_vote(&body(json!({"voter": {"email": " A@B.co "}}))).unwrap();
        assert_eq!(v.keys(), ["ea@b.co"]);
    }
}
