//! The order, filters and cursors of the survey and response lists (sorted in memory: an
//! app holds few surveys).

use super::response::{SurveyResponse, RESPONSE_PREFIX};
use super::survey::{Survey, SurveyStatus, SurveyType};
use crate::ids::{self, Timestamp};
use crate::storage::cursor::Cursor;

/// The sortable fields of a survey list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortField {
    CreatedAt,
    UpdatedAt,
    ResponseCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub field: SortField,
    pub descending: bool,
}

impl Sort {
    /// `createdAt`, `updatedAt`, `responseCount`, each optionally with `-`; default
    /// `-createdAt`.
    pub fn parse(raw: Option<&str>) -> Option<Sort> {
        let raw = raw.unwrap_or("-createdAt").trim();
        let (descending, name) = match raw.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, raw.strip_prefix('+').unwrap_or(raw)),
        };
        let field = match name {
            "createdAt" => SortField::CreatedAt,
            "updatedAt" => SortField::UpdatedAt,
            "responseCount" => SortField::ResponseCount,
            _ => return None,
        };
        Some(Sort { field, descending })
    }

    /// The field's tag in a cursor (the shared cursor adds the direction).
    fn tag(self) -> u8 {
        match self.field {
            SortField::CreatedAt => b'c',
            SortField::UpdatedAt => b'u',
            SortField::ResponseCount => b'r',
        }
    }

    fn key(self, s: &Survey) -> i64 {
        match self.field {
            SortField::CreatedAt => s.created_at.micros(),
            SortField::UpdatedAt => s.updated_at.micros(),
            SortField::ResponseCount => s.response_count as i64,
        }
    }
}

/// A page's end as a cursor (the shared [`Cursor`] of sorted walks): the sort key (8 bytes,
/// big-endian) and the id of its last item.
fn cursor_at(key: i64, id: &str) -> Cursor {
    Cursor::new([&key.to_be_bytes()[..], id.as_bytes()].concat())
}

/// The sort key and id a cursor resumes after; `None` unless it holds a valid id.
fn position(entry: &[u8]) -> Option<(i64, String)> {
    let (key, id) = entry.split_first_chunk::<8>()?;
    let id = std::str::from_utf8(id).ok()?;
    ids::is_object_id(id.strip_prefix(RESPONSE_PREFIX).unwrap_or(id))
        .then(|| (i64::from_be_bytes(*key), id.to_owned()))
}

impl Sort {
    /// A cursor as clients see it, bound to this sort order and the list (`scope`: the app, or
    /// the app and survey; a cursor of another list is 400).
    pub fn encode_cursor(self, c: &Cursor, scope: &str) -> String {
        c.encode(self.tag(), self.descending, scope)
    }

    /// `None` for a malformed cursor, or one made for another sort order or another list.
    pub fn decode_cursor(self, raw: &str, scope: &str) -> Option<Cursor> {
        Cursor::decode(raw, self.tag(), self.descending, scope, |e| {
            position(e).is_some()
        })
    }
}

/// Which surveys a list shows: statuses (empty: any), types (empty: any), boards (empty: any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub statuses: Vec<SurveyStatus>,
    pub types: Vec<SurveyType>,
    pub board_ids: Vec<String>,
}

impl Filter {
    pub fn matches(&self, s: &Survey) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&s.status))
            && (self.types.is_empty() || self.types.contains(&s.kind))
            && (self.board_ids.is_empty()
                || s.board_id
                    .as_ref()
                    .is_some_and(|b| self.board_ids.contains(b)))
    }
}

/// One page of `items` (any order in, already filtered): sorted by `key` (sort key, id),
/// starting after `cursor`; answers the page and the cursor of the next one.
pub fn page_by<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> (i64, String),
    descending: bool,
    limit: usize,
    cursor: Option<&Cursor>,
) -> (Vec<T>, Option<Cursor>) {
    items.sort_by_cached_key(&key);
    if descending {
        items.reverse();
    }
    let after = cursor.and_then(|c| position(c.entry()));
    let rest: Vec<T> = items
        .into_iter()
        .filter(|s| match &after {
            None => true,
            Some(c) if descending => key(s) < *c,
            Some(c) => key(s) > *c,
        })
        .collect();
    let has_more = rest.len() > limit;
    let page: Vec<T> = rest.into_iter().take(limit).collect();
    let next = has_more
        .then(|| {
            page.last().map(|s| {
                let (key, id) = key(s);
                cursor_at(key, &id)
            })
        })
        .flatten();
    (page, next)
}

/// One page of surveys, filtered and sorted.
pub fn page(
    mut surveys: Vec<Survey>,
    filter: &Filter,
    sort: Sort,
    limit: usize,
    cursor: Option<&Cursor>,
) -> (Vec<Survey>, Option<Cursor>) {
    surveys.retain(|s| filter.matches(s));
    page_by(
        surveys,
        |s| (sort.key(s), s.id.clone()),
        sort.descending,
        limit,
        cursor,
    )
}

/// Which responses a list shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResponseFilter {
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    pub completed: Option<bool>,
    pub user_ids: Vec<String>,
    pub anonymous_ids: Vec<String>,
}

impl ResponseFilter {
    pub fn matches(&self, r: &SurveyResponse) -> bool {
        self.since.is_none_or(|t| r.created_at >= t)
            && self.until.is_none_or(|t| r.created_at < t)
            && self.completed.is_none_or(|c| r.completed == c)
            && (self.user_ids.is_empty()
                || r.user_id
                    .as_ref()
                    .is_some_and(|u| self.user_ids.contains(u)))
            && (self.anonymous_ids.is_empty() || self.anonymous_ids.contains(&r.anonymous_id))
    }
}

/// One page of responses, filtered and sorted (createdAt or updatedAt).
pub fn page_responses(
    mut responses: Vec<SurveyResponse>,
    filter: &ResponseFilter,
    sort: Sort,
    limit: usize,
    cursor: Option<&Cursor>,
) -> (Vec<SurveyResponse>, Option<Cursor>) {
    responses.retain(|r| filter.matches(r));
    let key = move |r: &SurveyResponse| {
        let k = match sort.field {
            SortField::UpdatedAt => r.updated_at.micros(),
            _ => r.created_at.micros(),
        };
        (k, r.id.clone())
    };
    page_by(responses, key, sort.descending, limit, cursor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surveys::survey::tests::survey;

    #[test]
    fn a_cursor_walk_sees_every_survey_once() {
        let all: Vec<Survey> = (0..25)
            .map(|n| survey(n % 7, SurveyStatus::Active))
            .collect();
        let all: Vec<Survey> = all
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                s.id = format!("{i:024x}");
                s
            })
            .collect();
        let sort = Sort::parse(None).unwrap();
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let c = cursor
                .as_ref()
                .map(|c: &String| sort.decode_cursor(c, "app").unwrap());
            let (page, next) = page(all.clone(), &Filter::default(), sort, 4, c.as_ref());
            seen.extend(page.into_iter().map(|s| s.id));
            match next {
                Some(n) => cursor = Some(sort.encode_cursor(&n, "app")),
                None => break,
            }
        }
        assert_eq!(seen.len(), 25);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 25);
        let c = sort.encode_cursor(&cursor_at(1, &"0".repeat(24)), "app");
        assert!(sort.decode_cursor(&c, "app").is_some());
        assert!(sort.decode_cursor(&c, "other").is_none());
        let ascending = Sort::parse(Some("createdAt")).unwrap();
        assert!(ascending.decode_cursor(&c, "app").is_none());
        let not_an_id = sort.encode_cursor(&cursor_at(1, "x"), "app");
        assert!(sort.decode_cursor(&not_an_id, "app").is_none());
    }
}
