//! Pagination's ground: the one cursor of every list and the one walk that fills a page.
//!
//! A cursor is the position after the last item of a page: the item's entry in the walk (an
//! index entry after its field tag, or a record's id). Clients see it as base64url of: the
//! list's order (field tag, direction), four bytes naming the list's scope (the app, or the app
//! and the parent record), the entry. A [`Listing`] names that order and scope; a cursor made
//! for another order or another scope is refused, so it can never read across apps or lists.
//!
//! [`page`] walks the keys under a prefix after a cursor and fills a page through a `resolve`
//! function (load the record, filter it); every list that walks sled uses it, and lists sorted
//! in memory make their entries the same way.

use std::ops::Bound::{Excluded, Included, Unbounded};

use base64::Engine;

use super::StoreError;

/// A position in a walk: the entry (key after the walk's prefix) to resume after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(Vec<u8>);

/// Four bytes naming the scope a cursor was made for.
fn scope_tag(scope: &str) -> [u8; 4] {
    let h = <sha2::Sha256 as sha2::Digest>::digest(scope.as_bytes());
    [h[0], h[1], h[2], h[3]]
}

fn direction(descending: bool) -> u8 {
    if descending {
        b'-'
    } else {
        b'+'
    }
}

impl Cursor {
    pub fn new(entry: Vec<u8>) -> Cursor {
        Cursor(entry)
    }

    /// The entry to resume after.
    pub fn entry(&self) -> &[u8] {
        &self.0
    }
}

/// What a cursor is bound to: one list (`scope`) walked in one order (`tag`, `descending`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub tag: u8,
    pub descending: bool,
    pub scope: String,
}

impl Listing {
    pub fn new(tag: u8, descending: bool, scope: impl Into<String>) -> Listing {
        Listing {
            tag,
            descending,
            scope: scope.into(),
        }
    }

    /// The cursor as clients see it.
    pub fn encode(&self, c: &Cursor) -> String {
        let mut raw = vec![self.tag, direction(self.descending)];
        raw.extend_from_slice(&scope_tag(&self.scope));
        raw.extend_from_slice(&c.0);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// `None` for a malformed cursor, one made for another order or scope, or an entry that
    /// `valid` refuses.
    pub fn decode(&self, s: &str, valid: impl FnOnce(&[u8]) -> bool) -> Option<Cursor> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .ok()?;
        let (head, entry) = raw.split_at_checked(6)?;
        let ok = head[..2] == [self.tag, direction(self.descending)]
            && head[2..] == scope_tag(&self.scope);
        (ok && valid(entry)).then(|| Cursor(entry.to_vec()))
    }
}

/// The sortable fields of a list: the name clients use, and the tag cursors (and indexes)
/// carry.
pub trait Sortable: Copy {
    fn parse(name: &str) -> Option<Self>;
    fn tag(self) -> u8;
}

/// Declares a list's sortable fields: their names (as `names!` does) and each one's tag,
/// `CreatedAt = "createdAt" / b'c'`, with their [`Sortable`].
macro_rules! sort_fields {
    (
        $(#[doc = $doc:literal])*
        $vis:vis $name:ident { $($variant:ident = $text:literal / $tag:literal),+ $(,)? }
    ) => {
        $crate::fields::names! {
            $(#[doc = $doc])*
            $vis $name { $($variant = $text),+ }
        }

        impl $crate::storage::cursor::Sortable for $name {
            fn parse(s: &str) -> Option<$name> {
                $name::parse(s)
            }

            fn tag(self) -> u8 {
                match self {
                    $($name::$variant => $tag),+
                }
            }
        }
    };
}
pub(crate) use sort_fields;

/// A list's order: a field and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort<F> {
    pub field: F,
    pub descending: bool,
}

impl<F: Sortable> Sort<F> {
    /// `field` or `+field` ascending (a `+` may arrive decoded as a space), `-field`
    /// descending; `default` when the parameter is absent. `None` for an unknown field.
    pub fn parse(raw: Option<&str>, default: &str) -> Option<Sort<F>> {
        let raw = raw.unwrap_or(default).trim();
        let (descending, name) = match raw.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, raw.strip_prefix('+').unwrap_or(raw)),
        };
        F::parse(name).map(|field| Sort { field, descending })
    }

    /// What this order's cursors are bound to in the list `scope` names.
    pub fn listing(self, scope: &str) -> Listing {
        Listing::new(self.field.tag(), self.descending, scope)
    }
}

/// Whether an entry ends with a record id (24 hex digits), the last part of every entry.
pub fn ends_with_id(entry: &[u8]) -> bool {
    entry.len() >= 24
        && std::str::from_utf8(&entry[entry.len() - 24..]).is_ok_and(crate::ids::is_object_id)
}

/// One page of a list, and the cursor of the next one (`None` on the last page).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<Cursor>,
    /// The walk stopped at its budget before the page was full (`next` goes on from there).
    pub cut: bool,
}

impl<T> Page<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            next: self.next,
            cut: self.cut,
        }
    }
}

/// How to walk: the page size, where to resume, the direction, and how many keys at most to
/// read (a selective filter then answers a short page in bounded time, the cursor going on).
#[derive(Debug, Clone, Copy)]
pub struct Walk<'a> {
    pub limit: usize,
    pub after: Option<&'a Cursor>,
    pub descending: bool,
    pub budget: usize,
}

impl<'a> Walk<'a> {
    /// Ascending, reading as many keys as it takes.
    pub fn new(limit: usize, after: Option<&'a Cursor>) -> Walk<'a> {
        Walk {
            limit,
            after,
            descending: false,
            budget: usize::MAX,
        }
    }

    pub fn descending(self, descending: bool) -> Walk<'a> {
        Walk { descending, ..self }
    }

    pub fn budget(self, budget: usize) -> Walk<'a> {
        Walk { budget, ..self }
    }
}

/// The first key after every key starting with `prefix` (`None`: no such key).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

type Entries = Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>>;

/// The keys under `prefix` in the walk's direction, after its cursor.
fn entries(tree: &sled::Tree, prefix: &[u8], walk: &Walk) -> Entries {
    let end = match prefix_end(prefix) {
        Some(e) => Excluded(e),
        None => Unbounded,
    };
    let resume = walk.after.map(|c| [prefix, c.entry()].concat());
    match (resume, walk.descending) {
        (None, false) => Box::new(tree.range((Included(prefix.to_vec()), end))),
        (None, true) => Box::new(tree.range((Included(prefix.to_vec()), end)).rev()),
        (Some(r), false) => Box::new(tree.range((Excluded(r), end))),
        (Some(r), true) => Box::new(tree.range((Included(prefix.to_vec()), Excluded(r))).rev()),
    }
}

/// One page of the walk over the keys under `prefix`. `resolve` turns an entry (the key after
/// `prefix`) and its value into an item, or `None` to pass over it (a filtered-out or missing
/// record). The next cursor is the last item's entry when more items follow; when the budget
/// runs out first, it is the last entry read and `cut` is set.
pub fn page<T>(
    tree: &sled::Tree,
    prefix: &[u8],
    walk: Walk,
    mut resolve: impl FnMut(&[u8], &sled::IVec) -> Result<Option<T>, StoreError>,
) -> Result<Page<T>, StoreError> {
    let mut items = Vec::with_capacity(walk.limit.min(1024));
    let mut last = None;
    let mut read: Option<sled::IVec> = None;
    for (scanned, kv) in entries(tree, prefix, &walk).enumerate() {
        let (key, value) = kv?;
        if scanned == walk.budget {
            let next = read.map(|k| Cursor::new(k[prefix.len()..].to_vec()));
            return Ok(Page {
                items,
                next,
                cut: true,
            });
        }
        let entry = &key[prefix.len()..];
        let item = resolve(entry, &value)?;
        read = Some(key.clone());
        let Some(item) = item else {
            continue;
        };
        if items.len() == walk.limit {
            return Ok(Page {
                items,
                next: last,
                cut: false,
            });
        }
        last = Some(Cursor::new(entry.to_vec()));
        items.push(item);
    }
    Ok(Page {
        items,
        next: None,
        cut: false,
    })
}

/// One page of `items` sorted in memory by `entry` (a key ending with the item's id, so no two
/// are equal): the ones after the cursor in the walk's direction. The budget is not used.
pub fn page_sorted<T>(mut items: Vec<T>, entry: impl Fn(&T) -> Vec<u8>, walk: Walk) -> Page<T> {
    let mut keyed: Vec<(Vec<u8>, T)> = items.drain(..).map(|i| (entry(&i), i)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    if walk.descending {
        keyed.reverse();
    }
    let after = |e: &[u8]| match walk.after {
        None => true,
        Some(c) if walk.descending => e < c.entry(),
        Some(c) => e > c.entry(),
    };
    let mut rest = keyed.into_iter().filter(|(e, _)| after(e));
    let page: Vec<(Vec<u8>, T)> = rest.by_ref().take(walk.limit).collect();
    let next = match rest.next() {
        Some(_) => page.last().map(|(e, _)| Cursor::new(e.clone())),
        None => None,
    };
    Page {
        items: page.into_iter().map(|(_, i)| i).collect(),
        next,
        cut: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_only_for_its_order_and_scope() {
        let c = Cursor::new(b"value-and-id".to_vec());
        let listing = Listing::new(b's', true, "app1");
        let s = listing.encode(&c);
        let any = |_: &[u8]| true;
        assert_eq!(listing.decode(&s, any), Some(c));
        assert_eq!(Listing::new(b's', false, "app1").decode(&s, any), None);
        assert_eq!(Listing::new(b'u', true, "app1").decode(&s, any), None);
        assert_eq!(Listing::new(b's', true, "app2").decode(&s, any), None);
        assert_eq!(listing.decode(&s, |e| e.len() > 100), None);
        assert_eq!(listing.decode("not base64!", any), None);
    }

    fn tree() -> sled::Tree {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree("t").unwrap();
        for i in 0..10u8 {
            tree.insert([b'p', i], &[i]).unwrap();
        }
        tree.insert(b"q", &[0]).unwrap();
        tree
    }

    fn walk_all(tree: &sled::Tree, walk: Walk, keep: fn(u8) -> bool) -> Vec<Vec<u8>> {
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let p = page(
                tree,
                b"p",
                Walk {
                    after: after.as_ref(),
                    ..walk
                },
                |e, _| Ok(keep(e[0]).then_some(e[0])),
            )
            .unwrap();
            pages.push(p.items);
            match p.next {
                Some(n) => after = Some(n),
                None => return pages.into_iter().map(|p| p.to_vec()).collect(),
            }
        }
    }

    #[test]
    fn a_walk_sees_every_kept_entry_once_in_either_direction() {
        let t = tree();
        let even = |v: u8| v.is_multiple_of(2);
        let up = walk_all(&t, Walk::new(2, None), even);
        assert_eq!(up, vec![vec![0, 2], vec![4, 6], vec![8]]);
        let down = walk_all(&t, Walk::new(3, None).descending(true), even);
        assert_eq!(down, vec![vec![8, 6, 4], vec![2, 0]]);
        // A budget of 3 keys a page: short pages, nothing skipped or repeated.
        let cut = walk_all(&t, Walk::new(5, None).budget(3), even);
        assert_eq!(cut.concat(), vec![0, 2, 4, 6, 8]);
        assert!(cut.len() > 1);
    }

    #[test]
    fn a_walk_under_a_prefix_of_high_bytes_ends_at_the_prefix() {
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn an_in_memory_page_resumes_after_its_cursor() {
        let entry = |v: &u8| vec![*v];
        let first = page_sorted(vec![3, 1, 2, 5, 4], entry, Walk::new(2, None));
        assert_eq!(first.items, vec![1, 2]);
        let c = first.next.unwrap();
        let second = page_sorted(vec![3, 1, 5, 4], entry, Walk::new(2, Some(&c)));
        assert_eq!(second.items, vec![3, 4]);
        let down = page_sorted(vec![3, 1, 2], entry, Walk::new(5, None).descending(true));
        assert_eq!((down.items, down.next), (vec![3, 2, 1], None));
    }
}
