//! The visitor's anonymousId: one rule for the collector and the survey widget. Its own file,
//! needing only `uuid`, so the decoder's fuzz target can include it by path.

use std::borrow::Cow;

/// The visitor's anonymousId in canonical form (lower-case, hyphenated): `{...}`, upper-case,
/// `urn:uuid:` and unhyphenated forms of one UUID are one visitor. The nil and max UUIDs are
/// refused: they are what broken clients send, and would merge every such visitor into one.
pub fn canonical_anonymous_id(s: &str) -> Result<String, &'static str> {
    let u = uuid::Uuid::try_parse(s).map_err(|_| "must be a UUID")?;
    canonical(u).map(|c| c.into_owned())
}

fn canonical(u: uuid::Uuid) -> Result<Cow<'static, str>, &'static str> {
    if u.is_nil() || u.is_max() {
        return Err("must not be the nil or max UUID");
    }
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    Ok(Cow::Owned(u.hyphenated().encode_lower(&mut buf).to_owned()))
}

/// The collector's rule, as lenient as the SDKs (a cookie value, a device id): a UUID in any
/// form is put in canonical form as above (nil and max refused); any other non-empty string
/// is kept as sent, borrowed.
pub fn visitor_id(s: &str) -> Result<Cow<'_, str>, &'static str> {
    if s.is_empty() {
        return Err("must be a non-empty string");
    }
    // What the trackers send: already canonical, so neither parsed nor copied.
    if is_canonical(s) && s != NIL && s != MAX {
        return Ok(Cow::Borrowed(s));
    }
    match uuid::Uuid::try_parse(s) {
        Ok(u) => canonical(u),
        Err(_) => Ok(Cow::Borrowed(s)),
    }
}

const NIL: &str = "00000000-0000-0000-0000-000000000000";
const MAX: &str = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/// A UUID, lower-case and hyphenated: 8-4-4-4-12 lower-case hexadecimal digits. Each byte
/// checked without an early exit, so the compiler checks them in a few vector instructions
/// (a loop with a test per position took 5 times as many instructions).
fn is_canonical(s: &str) -> bool {
    let Ok(b) = <&[u8; uuid::fmt::Hyphenated::LENGTH]>::try_from(s.as_bytes()) else {
        return false;
    };
    let hex_or_hyphen = b.iter().fold(true, |ok, &c| {
        ok & (c.is_ascii_digit() | (b'a'..=b'f').contains(&c) | (c == b'-'))
    });
    let hyphens: u8 = b.iter().map(|&c| u8::from(c == b'-')).sum();
    hex_or_hyphen && hyphens == 4 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canonical_uuid_is_borrowed_and_other_forms_of_it_made_canonical() {
        let id = "0b5e2f4a-8c1d-4e6f-9a7b-3c2d1e0f9a8b";
        assert!(matches!(visitor_id(id), Ok(Cow::Borrowed(s)) if s == id));
        for other in [
            "0B5E2F4A-8C1D-4E6F-9A7B-3C2D1E0F9A8B",
            "{0b5e2f4a-8c1d-4e6f-9a7b-3c2d1e0f9a8b}",
            "urn:uuid:0b5e2f4a-8c1d-4e6f-9a7b-3c2d1e0f9a8b",
            "0b5e2f4a8c1d4e6f9a7b3c2d1e0f9a8b",
        ] {
            assert!(
                matches!(visitor_id(other), Ok(Cow::Owned(s)) if s == id),
                "{other}"
            );
        }
    }

    #[test]
    fn nil_max_and_empty_are_refused_and_other_strings_kept_as_sent() {
        for refused in [NIL, MAX, "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", ""] {
            assert!(visitor_id(refused).is_err(), "{refused}");
        }
        // Hyphens misplaced, a letter past f, one digit short: not UUIDs, kept.
        for kept in [
            "0b5e2f4a8-c1d-4e6f-9a7b-3c2d1e0f9a8b",
            "0b5e2f4a-8c1d-4e6f-9a7b-3c2d1e0f9a8g",
            "0b5e2f4a-8c1d-4e6f-9a7b-3c2d1e0f9a8",
            "cookie-value.123",
        ] {
            assert!(
                matches!(visitor_id(kept), Ok(Cow::Borrowed(s)) if s == kept),
                "{kept}"
            );
            assert!(!is_canonical(kept), "{kept}");
        }
    }
}
