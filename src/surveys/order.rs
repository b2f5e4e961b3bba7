//! The order, filters and cursors of the survey and response lists (sorted in memory: an
//! app holds few surveys).

use super::response::{SurveyResponse, RESPONSE_PREFIX};
use super::survey::{Survey, SurveyStatus, SurveyType};
use crate::ids::{self, Timestamp};
use crate::storage::cursor::{self, page_sorted, Page, Walk};

cursor::sort_fields! {
    /// The sortable fields of a survey list.
    pub SortField {
        CreatedAt = "createdAt" / b'c',
        UpdatedAt = "updatedAt" / b'u',
        ResponseCount = "responseCount" / b'r',
    }
}

/// Order of a list (default `-createdAt`).
pub type Sort = cursor::Sort<SortField>;

impl SortField {
    fn key(self, s: &Survey) -> i64 {
        match self {
            SortField::CreatedAt => s.created_at.micros(),
            SortField::UpdatedAt => s.updated_at.micros(),
            SortField::ResponseCount => s.response_count as i64,
        }
    }
}

/// An item's entry in a walk (the shared cursor's): the sort key (8 bytes, big-endian with the
/// sign flipped, so bytes sort as numbers) and the id.
fn entry(key: i64, id: &str) -> Vec<u8> {
    [&((key as u64) ^ (1 << 63)).to_be_bytes()[..], id.as_bytes()].concat()
}

/// Whether a cursor's entry holds a sort key and a survey's or response's id.
pub fn valid_entry(entry: &[u8]) -> bool {
    entry.split_at_checked(8).is_some_and(|(_, id)| {
        std::str::from_utf8(id)
            .is_ok_and(|id| ids::is_object_id(id.strip_prefix(RESPONSE_PREFIX).unwrap_or(id)))
    })
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

/// One page of surveys, filtered and sorted.
pub fn page(mut surveys: Vec<Survey>, filter: &Filter, sort: Sort, walk: Walk) -> Page<Survey> {
    surveys.retain(|s| filter.matches(s));
    page_sorted(surveys, |s| entry(sort.field.key(s), &s.id), walk)
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
    walk: Walk,
) -> Page<SurveyResponse> {
    responses.retain(|r| filter.matches(r));
    let key = move |r: &SurveyResponse| {
        let at = match sort.field {
            SortField::UpdatedAt => r.updated_at,
            _ => r.created_at,
        };
        entry(at.micros(), &r.id)
    };
    page_sorted(responses, key, walk)
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
        let sort = Sort::parse(None, "-createdAt").unwrap();
        let listing = sort.listing("app");
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let c = cursor
                .as_ref()
                .map(|c: &String| listing.decode(c, valid_entry).unwrap());
            let walk = Walk::new(4, c.as_ref()).descending(true);
            let p = page(all.clone(), &Filter::default(), sort, walk);
            seen.extend(p.items.into_iter().map(|s| s.id));
            match p.next {
                Some(n) => cursor = Some(listing.encode(&n)),
                None => break,
            }
        }
        assert_eq!(seen.len(), 25);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 25);
        assert!(valid_entry(&entry(-1, &"0".repeat(24))));
        assert!(!valid_entry(&entry(1, "x")));
        assert!(entry(-1, "a") < entry(0, "a") && entry(0, "a") < entry(1, "a"));
    }
}
