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
    match uuid::Uuid::try_parse(s) {
        // Already canonical: no copy made here.
        Ok(u) if !u.is_nil() && !u.is_max() && is_canonical(s) => Ok(Cow::Borrowed(s)),
        Ok(u) => canonical(u),
        Err(_) => Ok(Cow::Borrowed(s)),
    }
}

/// Lower-case and hyphenated (the shape `try_parse` accepted is a UUID's).
fn is_canonical(s: &str) -> bool {
    s.len() == uuid::fmt::Hyphenated::LENGTH
        && s.bytes()
            .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
