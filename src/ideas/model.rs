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
use crate::fields::{Body, Field, Kind, Mode, Parsed, Shape, Text, Unknown, EMAIL, OBJECT_ID};
use crate::ids::{self, Timestamp};
use crate::validation::FieldError;

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

/// A past time for imports (`createdAt` of an idea or a vote); "past" is checked against the
/// server's clock by `dated`.
static PAST_TIME: Shape = Shape {
    pattern: "^(19[7-9][0-9]|20[01][0-9]|202[0-5])-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])(T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z)?$",
    parse: |s| match Timestamp::parse(s) {
        Some(t) => Ok(t.to_string()),
        None => Err("must be an ISO 8601 timestamp".into()),
    },
    hint: "an ISO 8601 timestamp",
};

const CREATED_AT: Field = Field::new("createdAt", Kind::Shape(&PAST_TIME)).doc(
    "A past time, for imports (default: now): `YYYY-MM-DD`, or with `THH:MM:SS[.mmm]Z`. The \
     pattern shows dates up to 2025; any RFC 3339 time not in the future is accepted.",
);

const PERSON_ID: Field = Field::text("id", Text::line(1, MAX_PERSON_ID_CHARS))
    .required()
    .doc("The host product's user id: 1 to 128 characters (trimmed).");

const PERSON_NAME: Field = Field::text("name", Text::line(1, MAX_PERSON_NAME_CHARS))
    .required()
    .doc("1 to 100 characters (trimmed).");

const PERSON_EMAIL: Field = Field::new("email", Kind::Shape(&EMAIL))
    .required()
    .doc("A valid address, normalised as a contact's.");

/// Someone named in a body: the author of an idea or a comment.
static PERSON: Body = Body::new(
    "PersonInput",
    "Someone named in a body (unknown fields are refused).",
    &[PERSON_ID, PERSON_NAME, PERSON_EMAIL],
);

/// Who votes: an id, an e-mail or both (the same voter when either matches).
static VOTER: Body = Body {
    any_of: Some((&["id", "email"], "needs an id or an e-mail")),
    ..Body::new(
        "VoterInput",
        "Who votes: an id, an e-mail or both (the same voter when either matches).",
        &[
            PERSON_ID.optional().nullable(),
            PERSON_EMAIL.optional().nullable(),
            PERSON_NAME.optional().nullable(),
        ],
    )
};

/// Who edits a comment: the author's id (other fields are ignored).
static AUTHOR_REF: Body = Body {
    unknown: Unknown::Ignore,
    ..Body::new(
        "AuthorRef",
        "Who edits a comment: the author's id (other fields are ignored).",
        &[PERSON_ID],
    )
};

const TITLE: Field = Field::text("title", Text::line(MIN_TITLE_CHARS, MAX_TITLE_CHARS))
    .required()
    .doc("3 to 150 characters (trimmed).");

const DESCRIPTION: Field = Field::text("description", Text::lines(0, MAX_DESCRIPTION_CHARS))
    .nullable()
    .doc("Up to 10000 characters (trimmed); empty or `null`: none.");

const TOPIC_ID: Field = Field::new("topicId", Kind::Shape(&OBJECT_ID))
    .nullable()
    .doc("A topic of the board; `null`: none.");

static ID: Kind = Kind::Shape(&OBJECT_ID);

const TAG_IDS: Field = Field::new(
    "tagIds",
    Kind::List {
        item: &ID,
        max: MAX_TAGS_PER_IDEA,
        noun: "ids",
    },
)
.doc("Tags of the board, at most 20 (a repeated id counts once).");

/// The body of an idea's create.
pub static IDEA: Body = Body::new(
    "IdeaCreate",
    "",
    &[
        Field::new("boardId", Kind::Shape(&OBJECT_ID))
            .doc("A board of the app; default: the default board."),
        TITLE,
        DESCRIPTION,
        TOPIC_ID,
        TAG_IDS,
        Field::new("author", Kind::Object(&PERSON)).required(),
        CREATED_AT,
    ],
);

/// The body of an idea's merge patch.
pub static IDEA_PATCH: Body = Body::new(
    "IdeaChanges",
    "",
    &[
        TITLE,
        DESCRIPTION,
        TOPIC_ID,
        TAG_IDS.nullable(),
        Field::new("statusId", Kind::Shape(&OBJECT_ID)).doc("A status of the idea's board."),
    ],
);

/// The body of a merge.
pub static MERGE: Body = Body::new(
    "MergeInput",
    "",
    &[Field::new("intoId", Kind::Shape(&OBJECT_ID))
        .required()
        .doc("Another idea of the app.")],
);

/// The body of a vote.
pub static VOTE: Body = Body::new(
    "VoteInput",
    "",
    &[
        Field::new("voter", Kind::Object(&VOTER)).required(),
        CREATED_AT,
    ],
);

const CONTENT: Field = Field::text("content", Text::lines(1, MAX_COMMENT_CHARS))
    .required()
    .doc("1 to 5000 characters (trimmed).");

/// The body of a comment.
pub static COMMENT: Body = Body::new(
    "CommentCreate",
    "",
    &[
        CONTENT,
        Field::new("author", Kind::Object(&PERSON)).required(),
        Field::new("parentId", Kind::Shape(&OBJECT_ID))
            .nullable()
            .doc("A comment of the same idea, to reply to."),
        Field::new("internal", Kind::Bool)
            .nullable()
            .doc("Visible to `ideas:moderate` keys only (and needs one); default `false`."),
    ],
);

/// The body of a comment's edit.
pub static COMMENT_EDIT: Body = Body::new(
    "CommentChanges",
    "",
    &[CONTENT, Field::new("author", Kind::Object(&AUTHOR_REF))],
);

fn person(p: &Parsed) -> Person {
    Person {
        id: p.string("id").unwrap_or_default(),
        name: p.string("name").unwrap_or_default(),
        email: p.string("email").unwrap_or_default(),
    }
}

/// `body` parsed by `kind` with its `createdAt` (else `now`), which must not be after `now`:
/// that error joins the others.
fn dated(
    kind: &Body,
    body: &Map<String, Value>,
    now: Timestamp,
) -> Result<(Parsed, Timestamp), Vec<FieldError>> {
    let given = body
        .get("createdAt")
        .and_then(Value::as_str)
        .and_then(Timestamp::parse);
    let future = given
        .filter(|t| *t > now)
        .map(|_| FieldError::new("createdAt", "must not be in the future"));
    match (kind.parse(body, Mode::Create), future) {
        (Ok(p), None) => Ok((p, given.unwrap_or(now))),
        (Ok(_), Some(e)) => Err(vec![e]),
        (Err(mut errors), Some(e)) => {
            errors.push(e);
            Err(errors)
        }
        (Err(errors), None) => Err(errors),
    }
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
    /// A create body; its `createdAt` (default `now`) must not be after `now`.
    pub fn parse(body: &Map<String, Value>, now: Timestamp) -> Result<IdeaDraft, Vec<FieldError>> {
        let (p, created_at) = dated(&IDEA, body, now)?;
        Ok(IdeaDraft {
            board_id: p.string("boardId"),
            title: p.string("title").unwrap_or_default(),
            description: p.string("description"),
            topic_id: p.string("topicId"),
            tag_ids: p.strings("tagIds").flatten().unwrap_or_default(),
            author: person(&p.object("author").unwrap_or_default()),
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
        let p = IDEA_PATCH.parse(body, Mode::Patch)?;
        Ok(IdeaPatch {
            title: p.string("title"),
            description: p.text("description"),
            topic_id: p.text("topicId"),
            tag_ids: p.strings("tagIds").map(Option::unwrap_or_default),
            status_id: p.string("statusId"),
        })
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
pub fn parse_vote(
    body: &Map<String, Value>,
    now: Timestamp,
) -> Result<(Voter, Timestamp), Vec<FieldError>> {
    let (p, created_at) = dated(&VOTE, body, now)?;
    let v = p.object("voter").unwrap_or_default();
    let voter = Voter {
        id: v.string("id"),
        name: v.string("name"),
        email: v.string("email"),
    };
    Ok((voter, created_at))
}

/// A validated comment body.
#[derive(Debug, Clone, PartialEq)]
pub struct CommentDraft {
    pub content: String,
    pub author: Person,
    pub parent_id: Option<String>,
    pub internal: bool,
}

impl CommentDraft {
    pub fn parse(body: &Map<String, Value>) -> Result<CommentDraft, Vec<FieldError>> {
        let p = COMMENT.parse(body, Mode::Create)?;
        Ok(CommentDraft {
            content: p.string("content").unwrap_or_default(),
            author: person(&p.object("author").unwrap_or_default()),
            parent_id: p.string("parentId"),
            internal: p.bool("internal").flatten().unwrap_or(false),
        })
    }

    /// The comment, made at `now`.
    pub fn comment(&self, idea_id: &str, now: Timestamp) -> Comment {
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
    let p = COMMENT_EDIT.parse(body, Mode::Create)?;
    let author = p.object("author").and_then(|a| a.string("id"));
    Ok((p.string("content").unwrap_or_default(), author))
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
        let now = Timestamp::from_micros(1_750_000_000_000_000);
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
        let e = IdeaDraft::parse(
            &body(json!({
                "title": "x", "description": 5, "topicId": "nope", "tagIds": ["zz"],
                "author": {"id": "", "email": "bad"}, "extra": 1, "createdAt": "2025-06-16"
            })),
            Timestamp::parse("2025-06-15").unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            fields(e),
            [
                "author.email",
                "author.id",
                "author.name",
                "createdAt",
                "description",
                "extra",
                "tagIds[0]",
                "title",
                "topicId"
            ]
        );
    }

    #[test]
    fn a_vote_needs_an_id_or_an_email() {
        let now = Timestamp::parse("2025-06-15").unwrap();
        assert_eq!(
            fields(parse_vote(&body(json!({"voter": {"name": "A"}})), now).unwrap_err()),
            ["voter"]
        );
        let (v, at) = parse_vote(&body(json!({"voter": {"email": " A@B.co "}})), now).unwrap();
        assert_eq!(
            (v.keys(), at),
            (vec!["ea@b.co".to_owned()], now),
            "created now"
        );
        let past = body(json!({"voter": {"id": "u"}, "createdAt": "2025-06-14"}));
        assert!(parse_vote(&past, now).is_ok());
        let future = body(json!({"voter": {"id": "u"}, "createdAt": "2025-06-16"}));
        assert_eq!(fields(parse_vote(&future, now).unwrap_err()), ["createdAt"]);
    }
}
