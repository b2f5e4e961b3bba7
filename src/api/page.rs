//! Pagination's HTTP side (api.md §2): the `limit` and `cursor` parameters of every list
//! ([`PageQuery`], one limit rule), a list's filters beside them ([`Listed`]), and the
//! `pagination` of the answer. Cursors are always opaque ([`Listing`], `storage::cursor`).

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{ApiError, FieldError};
use crate::storage::cursor::{Cursor, Listing, Page, Walk};

/// The page size when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest `limit`.
pub const MAX_LIMIT: usize = 100;

/// `pagination` of a list answer.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    pub limit: usize,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// The paging parameters of every list.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// 1..100, default 20.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// `pagination.nextCursor` of the previous page (opaque).
    pub cursor: Option<String>,
}

/// `limit`: 1..=100, default 20.
fn page_limit(limit: Option<&str>) -> Result<usize, FieldError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(s) => match s.parse::<usize>() {
            Ok(n @ 1..=MAX_LIMIT) => Ok(n),
            _ => Err(FieldError::new(
                "limit",
                format!("must be an integer from 1 to {MAX_LIMIT}"),
            )),
        },
    }
}

/// A page asked for: its size, where to resume, and the list its cursors are bound to.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub limit: usize,
    pub after: Option<Cursor>,
    listing: Listing,
}

impl PageQuery {
    /// The page asked for in `listing`; a bad limit or cursor (one `valid` refuses, or made for
    /// another list) goes to `errors`. `listing` is `None` when the list's order did not parse:
    /// the cursor is then not checked, and there is no page.
    pub fn parse(
        &self,
        listing: Option<Listing>,
        valid: impl FnOnce(&[u8]) -> bool,
        errors: &mut Vec<FieldError>,
    ) -> Option<PageRequest> {
        let limit = page_limit(self.limit.as_deref())
            .map_err(|e| errors.push(e))
            .ok();
        let listing = listing?;
        let after = match &self.cursor {
            None => Some(None),
            Some(raw) => match listing.decode(raw, valid) {
                Some(c) => Some(Some(c)),
                None => {
                    errors.push(FieldError::new(
                        "cursor",
                        "malformed, or made for another list or sort order",
                    ));
                    None
                }
            },
        };
        Some(PageRequest {
            limit: limit?,
            after: after?,
            listing,
        })
    }

    /// The page asked for in a list in creation order (its entries are record ids), such as
    /// an app's keys or an idea's votes (`scope`: the app, or the app and the parent).
    pub fn in_order(&self, tag: u8, scope: &str) -> Result<PageRequest, ApiError> {
        let mut errors = Vec::new();
        let listing = Listing::new(tag, false, scope);
        let valid = |e: &[u8]| std::str::from_utf8(e).is_ok_and(crate::ids::is_object_id);
        match self.parse(Some(listing), valid, &mut errors) {
            Some(p) if errors.is_empty() => Ok(p),
            _ => Err(ApiError::validation(errors)),
        }
    }
}

impl PageRequest {
    /// The walk of this page in the store.
    pub fn walk(&self) -> Walk<'_> {
        Walk::new(self.limit, self.after.as_ref()).descending(self.listing.descending)
    }

    /// The `pagination` of a page.
    pub fn pagination<T>(&self, page: &Page<T>) -> Pagination {
        Pagination {
            limit: self.limit,
            next_cursor: page.next.as_ref().map(|c| self.listing.encode(c)),
            has_more: page.next.is_some(),
        }
    }

    /// 200 with the page and its `pagination`.
    pub fn answer<T: Serialize>(&self, page: &Page<T>) -> HttpResponse {
        super::list(&page.items, &self.pagination(page))
    }
}

/// A list's query: its filters (`F`, which refuses unknown parameters) and the paging
/// parameters, so each list declares only its filters (`params(F, PageQuery)`).
#[derive(Debug)]
pub struct Listed<F> {
    pub filter: F,
    pub page: PageQuery,
}

impl<F> std::ops::Deref for Listed<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.filter
    }
}

impl<F: DeserializeOwned> Listed<F> {
    /// Splits a query string into the paging parameters and the filters.
    pub fn from_query(query: &str) -> Result<Listed<F>, serde::de::value::Error> {
        split_query(query)
    }
}

fn split_query<F: DeserializeOwned>(query: &str) -> Result<Listed<F>, serde::de::value::Error> {
    use serde::de::Error;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)?;
    let (paging, filters): (Vec<_>, Vec<_>) = pairs
        .into_iter()
        .partition(|(k, _)| k == "limit" || k == "cursor");
    let encode = |p: &[(String, String)]| {
        serde_urlencoded::to_string(p).map_err(|e| serde::de::value::Error::custom(e.to_string()))
    };
    let page = serde_urlencoded::from_str(&encode(&paging)?)?;
    let filter = serde_urlencoded::from_str(&encode(&filters)?).map_err(|e| {
        // The filters' unknown-parameter message names the paging parameters too.
        let msg = e.to_string();
        match msg.contains("unknown field `") {
            true => Error::custom(format!("{msg}, `limit`, `cursor`")),
            false => e,
        }
    })?;
    Ok(Listed { filter, page })
}

impl<F: DeserializeOwned> FromRequest for Listed<F> {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(split_query(req.query_string()).map_err(|e| {
            super::query_error(actix_web::error::QueryPayloadError::Deserialize(e), req)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Filters {
        status: Option<String>,
    }

    #[test]
    fn a_query_splits_into_filters_and_paging() {
        let q: Listed<Filters> = split_query("status=a&limit=5&cursor=xyz").unwrap();
        assert_eq!(q.status.as_deref(), Some("a"));
        assert_eq!(q.page.limit.as_deref(), Some("5"));
        assert_eq!(q.page.cursor.as_deref(), Some("xyz"));
        let unknown = split_query::<Filters>("sttus=a").unwrap_err().to_string();
        assert!(unknown.contains("`status`, `limit`, `cursor`"), "{unknown}");
        let twice = split_query::<Filters>("limit=1&limit=2")
            .unwrap_err()
            .to_string();
        assert!(twice.contains("duplicate field `limit`"), "{twice}");
    }

    #[test]
    fn one_limit_rule() {
        assert_eq!(page_limit(None).unwrap(), DEFAULT_LIMIT);
        assert_eq!(page_limit(Some("100")).unwrap(), 100);
        for bad in ["0", "101", "-1", "x", ""] {
            assert!(page_limit(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cursor_of_another_list_is_refused() {
        let q = PageQuery::default();
        let first = q.in_order(b'v', "app/idea1").unwrap();
        let page = Page {
            items: vec![1],
            next: Some(Cursor::new(b"0123456789abcdef01234567".to_vec())),
            cut: false,
        };
        let next = first.pagination(&page).next_cursor.unwrap();
        let again = PageQuery {
            limit: None,
            cursor: Some(next),
        };
        assert!(again.in_order(b'v', "app/idea1").unwrap().after.is_some());
        assert!(again.in_order(b'v', "app/idea2").is_err());
        assert!(again.in_order(b'c', "app/idea1").is_err());
    }
}
