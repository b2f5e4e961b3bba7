//! Cursors of sorted index walks (contacts, ideas, and every later list that walks an index).
//!
//! A cursor is the index entry of the last item of a page, after the field tag. Clients see it
//! as base64url of: the sort (field tag, direction), four bytes naming the app, the entry; a
//! cursor made for another sort or another app is refused, so it can never read across apps.

use base64::Engine;

/// A position in a sorted walk: the index entry after the field tag (value bytes + id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(Vec<u8>);

/// Four bytes naming the app a cursor was made for.
fn app_tag(app: &str) -> [u8; 4] {
    let h = <sha2::Sha256 as sha2::Digest>::digest(app.as_bytes());
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

    /// The index entry (after the field tag) to resume after.
    pub fn entry(&self) -> &[u8] {
        &self.0
    }

    pub fn encode(&self, field: u8, descending: bool, app: &str) -> String {
        let mut raw = vec![field, direction(descending)];
        raw.extend_from_slice(&app_tag(app));
        raw.extend_from_slice(&self.0);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// `None` for a malformed cursor, one made for another sort or another app, or an entry
    /// that `valid` refuses.
    pub fn decode(
        s: &str,
        field: u8,
        descending: bool,
        app: &str,
        valid: impl FnOnce(&[u8]) -> bool,
    ) -> Option<Cursor> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .ok()?;
        let (head, entry) = raw.split_at_checked(6)?;
        let ok = head[..2] == [field, direction(descending)] && head[2..] == app_tag(app);
        (ok && valid(entry)).then(|| Cursor(entry.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_only_for_its_sort_and_app() {
        let c = Cursor::new(b"value-and-id".to_vec());
        let s = c.encode(b's', true, "app1");
        let any = |_: &[u8]| true;
        assert_eq!(Cursor::decode(&s, b's', true, "app1", any), Some(c));
        assert_eq!(Cursor::decode(&s, b's', false, "app1", any), None);
        assert_eq!(Cursor::decode(&s, b'u', true, "app1", any), None);
        assert_eq!(Cursor::decode(&s, b's', true, "app2", any), None);
        assert_eq!(
            Cursor::decode(&s, b's', true, "app1", |e| e.len() > 100),
            None
        );
        assert_eq!(Cursor::decode("not base64!", b's', true, "app1", any), None);
    }
}
