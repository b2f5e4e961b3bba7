//! Boards and what each board defines for its ideas (statuses, topics, tags) as typed values,
//! and the validation of their admin bodies (api.md §6). No sled, no HTTP.
//!
//! A board is one record holding its small lists: statuses (ordered; `position` is the index),
//! topics and tags. Every board starts with the default statuses of api.md §6; `Open` (the
//! status of a new idea) and `Duplicate` (the status of a merged idea) are built in: they can be
//! renamed and recoloured, not deleted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields::{names, Body, Field, Kind, Mode, NameSet, Shape, Text};
use crate::ids::{self, Timestamp};
use crate::validation::FieldError;

pub const MAX_STATUSES: usize = 30;
pub const MAX_TOPICS: usize = 100;
pub const MAX_TAGS: usize = 200;
pub const MAX_NAME_CHARS: usize = 60;
pub const MAX_BOARD_NAME_CHARS: usize = 100;
pub const MAX_DESCRIPTION_CHARS: usize = 1000;

/// A colour in the `#rrggbb` form, lowercased.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(transparent)]
#[schema(value_type = String, example = "#9ca3af")]
pub struct Color(String);

impl Color {
    pub fn parse(raw: &str) -> Option<Color> {
        let hex = raw.strip_prefix('#')?;
        (hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Color(format!("#{}", hex.to_ascii_lowercase())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

names! {
    /// Whether ideas in a status still take votes (`open`) or not (`closed`).
    pub StatusKind { Open = "open", Closed = "closed" }
}

/// A status of a board's ideas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdeaStatus {
    pub id: String,
    pub board_id: String,
    pub name: String,
    pub color: Color,
    pub kind: StatusKind,
    /// 0-based place in the board's order.
    pub position: usize,
    /// Built-in statuses (Open, Duplicate) cannot be deleted.
    pub built_in: bool,
}

/// A thematic category of ideas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topic {
    pub id: String,
    pub board_id: String,
    pub name: String,
}

/// A label on ideas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tag {
    pub id: String,
    pub board_id: String,
    pub name: String,
    pub color: Option<Color>,
}

/// A board as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Board {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    /// The board every app starts with.
    pub is_default: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A board as stored: the board and its lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoardRecord {
    pub board: Board,
    pub statuses: Vec<IdeaStatus>,
    pub topics: Vec<Topic>,
    pub tags: Vec<Tag>,
    pub open_status_id: String,
    pub duplicate_status_id: String,
}

/// The statuses every board starts with (api.md §6): name, colour, kind.
pub const DEFAULT_STATUSES: [(&str, &str, StatusKind); 7] = [
    ("Open", "#9ca3af", StatusKind::Open),
    ("Under review", "#f5a623", StatusKind::Open),
    ("Planned", "#0096ff", StatusKind::Open),
    ("In progress", "#9437ff", StatusKind::Open),
    ("Completed", "#6ac47c", StatusKind::Closed),
    ("Declined", "#ff2600", StatusKind::Closed),
    ("Duplicate", "#6b7280", StatusKind::Closed),
];

/// Why a change to a board was refused.
#[derive(Debug, PartialEq)]
pub enum Rejection {
    Invalid(Vec<FieldError>),
    /// 409: a name taken, a list full, a built-in status.
    Conflict(String),
    /// 404: no such status, topic or tag on this board.
    NotFound(&'static str),
}

/// Which list of a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Statuses,
    Topics,
    Tags,
}

impl Part {
    pub fn item(self) -> &'static str {
        match self {
            Part::Statuses => "status",
            Part::Topics => "topic",
            Part::Tags => "tag",
        }
    }
}

/// A validated body for a board, a status, a topic or a tag (create or merge patch).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemPatch {
    pub name: Option<String>,
    /// `Some(None)`: clear (tags only).
    pub color: Option<Option<Color>>,
    pub kind: Option<StatusKind>,
    pub position: Option<usize>,
    /// `Some(None)`: clear (boards only).
    pub description: Option<Option<String>>,
}

/// A colour: `#rrggbb`, lowercased.
static COLOR: Shape = Shape {
    pattern: "^#[0-9a-fA-F]{6}$",
    parse: |s| {
        Color::parse(s)
            .map(|c| c.0)
            .ok_or_else(|| "must be a colour in the #rrggbb form".into())
    },
    hint: "#rrggbb",
};

const ITEM_NAME: Field = Field::text("name", Text::line(1, MAX_NAME_CHARS))
    .required()
    .doc("1 to 60 characters (trimmed), no control characters; unique in the board (case-insensitive).");

/// The body of a board.
pub static BOARD: Body = Body::new(
    "Board",
    "",
    &[
        Field::text("name", Text::line(1, MAX_BOARD_NAME_CHARS))
            .required()
            .doc("1 to 100 characters (trimmed), no control characters."),
        Field::text("description", Text::lines(0, MAX_DESCRIPTION_CHARS))
            .nullable()
            .doc("Up to 1000 characters (trimmed); empty or `null`: none."),
    ],
);

/// The body of a status.
pub static STATUS: Body = Body::new(
    "IdeaStatus",
    "",
    &[
        ITEM_NAME,
        Field::new("color", Kind::Shape(&COLOR))
            .required()
            .doc("`#rrggbb`."),
        Field::new("kind", Kind::Names(NameSet::of::<StatusKind>())).doc("Default `open`."),
        Field::new(
            "position",
            Kind::Integer {
                min: 0,
                max: MAX_STATUSES as i64 - 1,
            },
        )
        .doc("0-based place in the list; default: last."),
    ],
);

/// The body of a topic.
pub static TOPIC: Body = Body::new("Topic", "", &[ITEM_NAME]);

/// The body of a tag.
pub static TAG: Body = Body::new(
    "Tag",
    "",
    &[
        ITEM_NAME,
        Field::new("color", Kind::Shape(&COLOR))
            .nullable()
            .doc("`#rrggbb`; absent or `null`: none."),
    ],
);

impl Part {
    /// The body of an item of this list.
    pub fn body(self) -> &'static Body {
        match self {
            Part::Statuses => &STATUS,
            Part::Topics => &TOPIC,
            Part::Tags => &TAG,
        }
    }
}

impl ItemPatch {
    /// Parses the body of a board (`None`) or a list item; `create` makes `name` (and a
    /// status's `color`) required.
    pub fn parse(
        body: &Map<String, Value>,
        part: Option<Part>,
        create: bool,
    ) -> Result<ItemPatch, Vec<FieldError>> {
        let table = part.map_or(&BOARD, Part::body);
        let mode = if create { Mode::Create } else { Mode::Patch };
        let p = table.parse(body, mode)?;
        Ok(ItemPatch {
            name: p.string("name"),
            color: p.text("color").map(|c| c.map(Color)),
            kind: p.name("kind"),
            position: p.integer("position").flatten().map(|n| n as usize),
            description: p.text("description"),
        })
    }
}

fn same_name(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

impl BoardRecord {
    /// A new board with the default statuses, made at `now`.
    pub fn new(
        name: String,
        description: Option<String>,
        is_default: bool,
        now: Timestamp,
    ) -> BoardRecord {
        let id = ids::object_id();
        let statuses: Vec<IdeaStatus> = DEFAULT_STATUSES
            .iter()
            .enumerate()
            .map(|(position, (name, color, kind))| IdeaStatus {
                id: ids::object_id(),
                board_id: id.clone(),
                name: (*name).into(),
                color: Color((*color).into()),
                kind: *kind,
                position,
                built_in: *name == "Open" || *name == "Duplicate",
            })
            .collect();
        BoardRecord {
            open_status_id: statuses[0].id.clone(),
            duplicate_status_id: statuses[6].id.clone(),
            board: Board {
                id,
                name,
                description,
                is_default,
                created_at: now,
                updated_at: now,
            },
            statuses,
            topics: Vec::new(),
            tags: Vec::new(),
        }
    }

    pub fn status(&self, id: &str) -> Option<&IdeaStatus> {
        self.statuses.iter().find(|s| s.id == id)
    }

    pub fn topic(&self, id: &str) -> Option<&Topic> {
        self.topics.iter().find(|t| t.id == id)
    }

    pub fn tag(&self, id: &str) -> Option<&Tag> {
        self.tags.iter().find(|t| t.id == id)
    }

    /// Applies a board body (name, description). The store stamps `updated_at` after every
    /// change (`boards::store::change`).
    pub fn patch_board(&mut self, p: &ItemPatch) {
        if let Some(n) = &p.name {
            self.board.name = n.clone();
        }
        if let Some(d) = &p.description {
            self.board.description = d.clone();
        }
    }

    fn names(&self, part: Part) -> Vec<(&str, &str)> {
        match part {
            Part::Statuses => self
                .statuses
                .iter()
                .map(|s| (s.id.as_str(), s.name.as_str()))
                .collect(),
            Part::Topics => self
                .topics
                .iter()
                .map(|s| (s.id.as_str(), s.name.as_str()))
                .collect(),
            Part::Tags => self
                .tags
                .iter()
                .map(|s| (s.id.as_str(), s.name.as_str()))
                .collect(),
        }
    }

    /// 409 when another item of the list already has `name` (case-insensitive).
    fn check_name(&self, part: Part, id: Option<&str>, name: &str) -> Result<(), Rejection> {
        if self
            .names(part)
            .iter()
            .any(|(i, n)| Some(*i) != id && same_name(n, name))
        {
            return Err(Rejection::Conflict(format!(
                "a {} named {name:?} exists on this board",
                part.item()
            )));
        }
        Ok(())
    }

    /// Adds a status, topic or tag from a create body; returns its id.
    pub fn add(&mut self, part: Part, p: &ItemPatch) -> Result<String, Rejection> {
        let name = p.name.clone().unwrap_or_default();
        self.check_name(part, None, &name)?;
        let (len, max) = match part {
            Part::Statuses => (self.statuses.len(), MAX_STATUSES),
            Part::Topics => (self.topics.len(), MAX_TOPICS),
            Part::Tags => (self.tags.len(), MAX_TAGS),
        };
        if len >= max {
            return Err(Rejection::Conflict(format!(
                "a board holds at most {max} {}s",
                part.item()
            )));
        }
        let id = ids::object_id();
        let board_id = self.board.id.clone();
        match part {
            Part::Statuses => {
                let color = p
                    .color
                    .clone()
                    .flatten()
                    .unwrap_or_else(|| Color("#9ca3af".into()));
                self.statuses.push(IdeaStatus {
                    id: id.clone(),
                    board_id,
                    name,
                    color,
                    kind: p.kind.unwrap_or(StatusKind::Open),
                    position: len,
                    built_in: false,
                });
                self.move_status(&id, p.position)?;
            }
            Part::Topics => self.topics.push(Topic {
                id: id.clone(),
                board_id,
                name,
            }),
            Part::Tags => self.tags.push(Tag {
                id: id.clone(),
                board_id,
                name,
                color: p.color.clone().flatten(),
            }),
        }
        Ok(id)
    }

    /// Moves status `id` to `position` (clamped to the end) and renumbers.
    fn move_status(&mut self, id: &str, position: Option<usize>) -> Result<(), Rejection> {
        if let Some(to) = position {
            let from = self
                .statuses
                .iter()
                .position(|s| s.id == id)
                .ok_or(Rejection::NotFound("status"))?;
            let s = self.statuses.remove(from);
            self.statuses.insert(to.min(self.statuses.len()), s);
        }
        for (i, s) in self.statuses.iter_mut().enumerate() {
            s.position = i;
        }
        Ok(())
    }

    /// Renames, recolours, re-kinds or moves an item.
    pub fn patch(&mut self, part: Part, id: &str, p: &ItemPatch) -> Result<(), Rejection> {
        if let Some(name) = &p.name {
            self.check_name(part, Some(id), name)?;
        }
        let not_found = Rejection::NotFound(part.item());
        match part {
            Part::Statuses => {
                let s = self
                    .statuses
                    .iter_mut()
                    .find(|s| s.id == id)
                    .ok_or(not_found)?;
                s.name = p.name.clone().unwrap_or(s.name.clone());
                if let Some(Some(c)) = &p.color {
                    s.color = c.clone();
                }
                s.kind = p.kind.unwrap_or(s.kind);
                self.move_status(id, p.position)?;
            }
            Part::Topics => {
                let t = self
                    .topics
                    .iter_mut()
                    .find(|t| t.id == id)
                    .ok_or(not_found)?;
                t.name = p.name.clone().unwrap_or(t.name.clone());
            }
            Part::Tags => {
                let t = self.tags.iter_mut().find(|t| t.id == id).ok_or(not_found)?;
                t.name = p.name.clone().unwrap_or(t.name.clone());
                if let Some(c) = &p.color {
                    t.color = c.clone();
                }
            }
        }
        Ok(())
    }

    /// Removes an item (the store has checked no idea uses it).
    pub fn remove(&mut self, part: Part, id: &str) -> Result<(), Rejection> {
        let found = match part {
            Part::Statuses => {
                if self.status(id).is_some_and(|s| s.built_in) {
                    return Err(Rejection::Conflict(
                        "a built-in status (Open, Duplicate) cannot be deleted".into(),
                    ));
                }
                let before = self.statuses.len();
                self.statuses.retain(|s| s.id != id);
                self.move_status(id, None)?;
                before != self.statuses.len()
            }
            Part::Topics => {
                let before = self.topics.len();
                self.topics.retain(|t| t.id != id);
                before != self.topics.len()
            }
            Part::Tags => {
                let before = self.tags.len();
                self.tags.retain(|t| t.id != id);
                before != self.tags.len()
            }
        };
        if !found {
            return Err(Rejection::NotFound(part.item()));
        }
        Ok(())
    }

    /// The list as JSON values, for the answers that show one list.
    pub fn list(&self, part: Part) -> Value {
        match part {
            Part::Statuses => serde_json::json!(self.statuses),
            Part::Topics => serde_json::json!(self.topics),
            Part::Tags => serde_json::json!(self.tags),
        }
    }

    /// One item as JSON.
    pub fn item(&self, part: Part, id: &str) -> Option<Value> {
        match part {
            Part::Statuses => self.status(id).map(|s| serde_json::json!(s)),
            Part::Topics => self.topic(id).map(|t| serde_json::json!(t)),
            Part::Tags => self.tag(id).map(|t| serde_json::json!(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_new_board_has_the_default_statuses_in_order() {
        let b = BoardRecord::new("Feedback".into(), None, true, Timestamp::from_micros(0));
        let names: Vec<&str> = b.statuses.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Open",
                "Under review",
                "Planned",
                "In progress",
                "Completed",
                "Declined",
                "Duplicate"
            ]
        );
        assert_eq!(b.status(&b.open_status_id).unwrap().name, "Open");
        assert_eq!(
            b.status(&b.duplicate_status_id).unwrap().kind,
            StatusKind::Closed
        );
    }

    #[test]
    fn a_position_is_an_integer_even_written_with_a_fraction_of_zero() {
        let at = |v: Value| {
            ItemPatch::parse(&body(json!({ "position": v })), Some(Part::Statuses), false)
                .map(|p| p.position)
        };
        assert_eq!(at(json!(21)), Ok(Some(21)));
        assert_eq!(at(json!(21.0)), Ok(Some(21)));
        for bad in [json!(21.5), json!(-1.0), json!(30.0), json!("1")] {
            assert!(at(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn status_bodies_are_checked_field_by_field() {
        let e = ItemPatch::parse(
            &body(json!({"color": "red", "kind": "x", "position": -1, "x": 1})),
            Some(Part::Statuses),
            true,
        )
        .unwrap_err();
        let mut fields: Vec<&str> = e.iter().map(|f| f.field.as_str()).collect();
        fields.sort();
        assert_eq!(fields, ["color", "kind", "name", "position", "x"]);
        let ok = ItemPatch::parse(
            &body(json!({"name": " Shipped ", "color": "#AABBCC"})),
            Some(Part::Statuses),
            true,
        )
        .unwrap();
        assert_eq!(ok.name.as_deref(), Some("Shipped"));
        assert_eq!(ok.color, Some(Some(Color("#aabbcc".into()))));
    }

    #[test]
    fn reordering_renumbers_and_built_ins_stay() {
        let mut b = BoardRecord::new("B".into(), None, false, Timestamp::from_micros(0));
        let p = ItemPatch {
            name: Some("Later".into()),
            position: Some(0),
            ..Default::default()
        };
        let id = b.add(Part::Statuses, &p).unwrap();
        assert_eq!(b.statuses[0].id, id);
        assert!(b.statuses.iter().enumerate().all(|(i, s)| s.position == i));
        assert!(matches!(
            b.add(Part::Statuses, &p),
            Err(Rejection::Conflict(_))
        ));
        let open = b.open_status_id.clone();
        assert!(matches!(
            b.remove(Part::Statuses, &open),
            Err(Rejection::Conflict(_))
        ));
        b.remove(Part::Statuses, &id).unwrap();
        assert_eq!(
            b.remove(Part::Statuses, &id),
            Err(Rejection::NotFound("status"))
        );
    }
}
