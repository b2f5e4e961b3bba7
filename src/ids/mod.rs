//! Identifiers, secrets and timestamps: one place that decides their shape.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use chrono::{DateTime, SecondsFormat, Utc};
use sha2::{Digest, Sha256};

mod visitor;
pub use visitor::{canonical_anonymous_id, visitor_id};

/// A MongoDB-style ObjectId as 24 lowercase hex characters: 4 bytes of Unix seconds, 5 bytes
/// random per process, 3 bytes of a counter. Ids made later sort after ids made earlier (to the
/// second), and two ids never collide inside one process.
pub fn object_id() -> String {
    static PROCESS: OnceLock<[u8; 5]> = OnceLock::new();
    static COUNTER: OnceLock<AtomicU32> = OnceLock::new();
    let process = PROCESS.get_or_init(random_bytes::<5>);
    let counter = COUNTER.get_or_init(|| {
        let seed = random_bytes::<4>();
        AtomicU32::new(u32::from_be_bytes(seed) & 0x00ff_ffff)
    });
    // An id, not a record's time: the system clock (ids stay unique across a moved test clock).
    let secs = Utc::now().timestamp().max(0) as u32;
    let n = counter.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    bytes[4..9].copy_from_slice(process);
    bytes[9..].copy_from_slice(&n.to_be_bytes()[1..]);
    hex::encode(bytes)
}

/// True when `s` has the shape of an [`object_id`].
pub fn is_object_id(s: &str) -> bool {
    s.len() == 24
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A request id as it appears in `meta.requestId` and `X-Request-Id`.
pub fn request_id() -> String {
    format!("req_{}", uuid::Uuid::new_v4().simple())
}

/// `N` bytes from the operating system's CSPRNG.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    buf
}

/// A fresh 256-bit secret in hex.
pub fn secret() -> String {
    hex::encode(random_bytes::<32>())
}

/// SHA-256 of a secret: what is stored instead of the secret. Keys carry 256 random bits, so a
/// fast hash is enough (no password stretching is needed for secrets nobody chose).
pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// ISO 8601 with millisecond precision and a `Z`, the form every API timestamp takes.
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an ISO 8601 / RFC 3339 timestamp (with offset) or a plain date (`YYYY-MM-DD`, midnight UTC).
pub fn parse_iso(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// A point in time as records keep it: compared and sorted as a time, written as ISO 8601 with
/// milliseconds and a `Z` (the form of every API timestamp), read back from any RFC 3339 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, utoipa::ToSchema)]
#[schema(value_type = String, format = DateTime, example = "2026-11-22T10:00:00.000Z")]
pub struct Timestamp(DateTime<Utc>);

#[cfg(test)]
impl Timestamp {
    /// A fixed instant for unit tests (mid-June 2025).
    pub fn t0() -> Timestamp {
        Timestamp::from_micros(1_750_000_000_000_000)
    }
}

impl Timestamp {
    /// Microseconds since the Unix epoch.
    pub fn micros(self) -> i64 {
        self.0.timestamp_micros()
    }

    /// Whole seconds since the Unix epoch.
    pub fn unix_secs(self) -> i64 {
        self.0.timestamp()
    }

    pub fn from_micros(micros: i64) -> Timestamp {
        Timestamp(DateTime::from_timestamp_micros(micros).unwrap_or_default())
    }

    pub fn parse(s: &str) -> Option<Timestamp> {
        parse_iso(s).map(Timestamp::from)
    }

    pub fn time(self) -> DateTime<Utc> {
        self.0
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Timestamp {
        // Records keep milliseconds, as the API shows them, so a stored time reads back equal.
        let millis = t.timestamp_millis();
        Timestamp(DateTime::from_timestamp_millis(millis).unwrap_or_default())
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&iso(self.0))
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&iso(self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an ISO 8601 time: {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_unique_hex() {
        let a = object_id();
        let b = object_id();
        assert!(is_object_id(&a) && is_object_id(&b));
        assert_ne!(a, b);
    }

    #[test]
    fn iso_round_trips_and_dates_parse() {
        let t = parse_iso("2026-01-02T03:04:05.678+02:00").unwrap();
        assert_eq!(iso(t), "2026-01-02T01:04:05.678Z");
        assert_eq!(
            iso(parse_iso("2026-01-02").unwrap()),
            "2026-01-02T00:00:00.000Z"
        );
        assert!(parse_iso("yesterday").is_none());
    }

    #[test]
    fn timestamps_keep_milliseconds_and_round_trip_through_json() {
        let t = Timestamp::parse("2026-01-02T03:04:05.678912+02:00").unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2026-01-02T01:04:05.678Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        assert!(Timestamp::parse("2026-01-02").unwrap() < t);
    }
}
