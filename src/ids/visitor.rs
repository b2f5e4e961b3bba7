//! The visitor's anonymousId: one rule for the collector and the survey widget. Its own file,
//! needing only `uuid`, so the decoder's fuzz target can include it by path.

/// The visitor's anonymousId in canonical form (lower-case, hyphenated): `{...}`, upper-case,
/// `urn:uuid:` and unhyphenated forms of one UUID are one visitor. The nil and max UUIDs are
/// refused: they are what broken clients send, and would merge every such visitor into one.
pub fn canonical_anonymous_id(s: &str) -> Result<String, &'static str> {
    let u = uuid::Uuid::try_parse(s).map_err(|_| "must be a UUID")?;
    if u.is_nil() || u.is_max() {
        return Err("must not be the nil or max UUID");
    }
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    Ok(u.hyphenated().encode_lower(&mut buf).to_owned())
}
